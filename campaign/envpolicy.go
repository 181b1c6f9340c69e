package campaign

import (
	"fmt"
	"slices"
	"strings"
)

// Variables of agentpen's own environment reach a container only by name
// (server.secret_env, server.api_key_env): their values are read at
// create time. agentpen's environment also holds its own secrets (the
// service's bearer token) and settings, so which names may be copied is
// the operator's to say (EnvPolicy), and agentpen's own AGENTPEN_* names
// never are, but for the grader key.

// checkCopiedEnv refuses, at validation, a name no operator may allow:
// an AGENTPEN_* name other than DefaultAPIKeyEnv (the grader key).
// field names it.
func checkCopiedEnv(field, name string) error {
	u := strings.ToUpper(name)
	if strings.HasPrefix(u, "AGENTPEN_") && u != DefaultAPIKeyEnv {
		return invalid(field, name, "is one of agentpen's own variables (AGENTPEN_*): only %s, the grader key, may be copied into a container", DefaultAPIKeyEnv)
	}
	return nil
}

// EnvPolicy is the operator's rule for which of agentpen's environment
// variables a campaign may copy into its containers (server.secret_env
// and server.api_key_env), checked when a campaign is created. The zero
// value allows DefaultAPIKeyEnv only.
type EnvPolicy struct {
	// Allowed are the names an operator allows (agentpen up --allow-env,
	// agentpen serve --allow-env), beside DefaultAPIKeyEnv.
	Allowed []string
	// Forbidden are names never copied, whatever Allowed says: the
	// service's own secrets (its bearer token's variable).
	Forbidden []string
}

// Check refuses a plan that would copy a name the policy does not allow,
// naming the field ("server.secret_env[1]", "server.api_key_env") and the
// flag that allows it.
func (pol EnvPolicy) Check(p *Plan) error {
	var errs errList
	check := func(field, name string) {
		u := strings.ToUpper(name)
		switch {
		case slices.ContainsFunc(pol.Forbidden, func(f string) bool { return strings.ToUpper(f) == u }):
			errs.add(invalid(field, name, "is one of this service's own secrets and is never copied into a container"))
		case u == DefaultAPIKeyEnv, slices.Contains(pol.Allowed, name):
		default:
			errs.add(invalid(field, name, "is not among the variables the operator allows campaigns to copy (--allow-env %s)", name))
		}
	}
	if p.Server.NeedsKey || anyNeedsKey(p) {
		check("server.api_key_env", p.Server.Spec.APIKeyEnv)
	}
	for i, name := range p.Server.Spec.SecretEnv {
		check(fmt.Sprintf("server.secret_env[%d]", i), name)
	}
	return errs.err()
}

func anyNeedsKey(p *Plan) bool {
	return slices.ContainsFunc(p.Agents, func(a AgentPlan) bool { return a.NeedsKey })
}

// CheckEnvPolicy refuses an operator's allow-list that names a variable
// never copied: agentpen's own AGENTPEN_* names (but the grader key), or
// one of forbidden (the service's secrets).
func CheckEnvPolicy(pol EnvPolicy) error {
	for _, name := range pol.Allowed {
		if err := CheckEnvName("--allow-env", name); err != nil {
			return err
		}
		if err := checkCopiedEnv("--allow-env", name); err != nil {
			return err
		}
		if slices.ContainsFunc(pol.Forbidden, func(f string) bool { return strings.EqualFold(f, name) }) {
			return invalid("--allow-env", name, "is one of this service's own secrets and is never copied into a container")
		}
	}
	return nil
}
