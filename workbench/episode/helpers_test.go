package episode

import (
	"context"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// newEnv returns an environment (on the tests' sandbox unless cfg names
// one) that is closed when the test ends.
func newEnv(t *testing.T, cfg Config) *Environment {
	t.Helper()
	if cfg.Sandbox == nil {
		cfg.Sandbox = sandboxtest.Shared(t)
	}
	env, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return env
}

func reset(t *testing.T, env *Environment, taskID string) Observation {
	t.Helper()
	obs, err := env.Reset(context.Background(), ResetOptions{TaskID: taskID})
	if err != nil {
		t.Fatalf("Reset(%s): %v", taskID, err)
	}
	return obs
}

// call makes an Action from a Go map of arguments.
func call(t testing.TB, tool string, argv map[string]any) Action {
	t.Helper()
	a := Action{Tool: tool, Args: map[string]json.RawMessage{}}
	for k, v := range argv {
		if raw, ok := v.(json.RawMessage); ok {
			a.Args[k] = raw
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		a.Args[k] = b
	}
	return a
}

// step runs a tool call and checks what every observation must be: valid
// UTF-8 and JSON-encodable.
func step(t *testing.T, env *Environment, tool string, argv map[string]any) Observation {
	t.Helper()
	obs, err := env.Step(context.Background(), call(t, tool, argv))
	if err != nil {
		t.Fatalf("Step(%s): %v", tool, err)
	}
	for name, s := range map[string]string{"output": obs.Output, "error": obs.Error} {
		if !utf8.ValidString(s) {
			t.Fatalf("Step(%s): %s is not valid UTF-8: %q", tool, name, s)
		}
	}
	if _, err := json.Marshal(obs); err != nil {
		t.Fatalf("Step(%s): observation does not encode: %v", tool, err)
	}
	return obs
}

func requireRoot(t *testing.T) { t.Helper(); testenv.RequireRoot(t) }
