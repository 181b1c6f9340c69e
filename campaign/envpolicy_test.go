package campaign

import (
	"errors"
	"strings"
	"testing"
)

// TestCopiedEnvRefusedAtValidation: agentpen's own variables (the
// service's token among them) are never copied into a container, named by
// their field path at validation, whatever the operator allows; an API
// client copied AGENTPEN_SERVE_TOKEN into the grader, and it attested ok.
func TestCopiedEnvRefusedAtValidation(t *testing.T) {
	for _, tt := range []struct {
		name  string
		mut   func(*CampaignSpec)
		field string
	}{
		{"secret_env_token", func(s *CampaignSpec) { s.Server.SecretEnv = []string{"OK_NAME", "AGENTPEN_SERVE_TOKEN"} }, "server.secret_env[1]"},
		{"secret_env_lower", func(s *CampaignSpec) { s.Server.SecretEnv = []string{"agentpen_serve_token"} }, "server.secret_env[0]"},
		{"api_key_env_token", func(s *CampaignSpec) { s.Server.APIKeyEnv = "AGENTPEN_SERVE_TOKEN" }, "server.api_key_env"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mut(&s)
			_, err := NewPlan(s)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field || !strings.Contains(ve.Msg, "agentpen's own variables") {
				t.Fatalf("err %v, want a refusal of %s", err, tt.field)
			}
		})
	}
	s := validSpec()
	s.Server.APIKeyEnv = DefaultAPIKeyEnv
	s.Server.SecretEnv = []string{"GRADER_DB_PASSWORD"}
	if _, err := NewPlan(s); err != nil {
		t.Fatalf("the grader key and another name: %v", err)
	}
}

// TestEnvPolicy: at create, a name is copied only when the operator
// allows it (the grader key always), never one of the service's secrets.
func TestEnvPolicy(t *testing.T) {
	s := validSpec()
	s.Server.SecretEnv = []string{"GRADER_DB_PASSWORD", "MY_SERVICE_TOKEN"}
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	err = EnvPolicy{}.Check(p)
	var list ValidationErrors
	if !errors.As(err, &list) || len(list) != 2 || list[0].Field != "server.secret_env[0]" || !strings.Contains(list[0].Msg, "--allow-env GRADER_DB_PASSWORD") {
		t.Fatalf("no allow-list: %v", err)
	}
	pol := EnvPolicy{Allowed: []string{"GRADER_DB_PASSWORD", "MY_SERVICE_TOKEN"}, Forbidden: []string{"my_service_token"}}
	var one *ValidationError
	if err := pol.Check(p); !errors.As(err, &one) || one.Field != "server.secret_env[1]" || !strings.Contains(one.Msg, "this service's own secrets") {
		t.Fatalf("a forbidden name allowed: %v", err)
	}
	pol.Forbidden = nil
	if err := pol.Check(p); err != nil {
		t.Fatalf("both allowed: %v", err)
	}
	// The operator's list is checked too.
	for _, bad := range []EnvPolicy{
		{Allowed: []string{"AGENTPEN_SERVE_TOKEN"}},
		{Allowed: []string{"TOKEN_VAR"}, Forbidden: []string{"TOKEN_VAR"}},
		{Allowed: []string{"1BAD"}},
	} {
		if err := CheckEnvPolicy(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := CheckEnvPolicy(EnvPolicy{Allowed: []string{DefaultAPIKeyEnv, "OPENAI_API_KEY"}}); err != nil {
		t.Errorf("a fair list refused: %v", err)
	}
}
