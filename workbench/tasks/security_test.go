package tasks

import (
	"regexp"
	"testing"
)

func TestSecurityTraps(t *testing.T) {
	checkTraps(t, "security", securityTraps, []trapCase{
		{family: "leaked_secrets", reason: ReasonExtra},               // placeholders flagged by a bare regex
		{family: "vulnerable_pins", reason: ReasonExtra},              // versions compared as text: 1.10 < 1.9
		{family: "unsafe_permissions", reason: ReasonExtra},           // symlinks and the sticky tmp flagged
		{family: "weak_tls", reason: ReasonExtra},                     // "!RC4" read as enabling RC4
		{family: "firewall_exposure", reason: ReasonMissing},          // IPv6 and port ranges overlooked
		{family: "cert_expiry", reason: ReasonWrongItems},             // expired certificates left out
		{family: "search_injection_fix", reason: ReasonHiddenPartial}, // bound, but LIKE wildcards remain
	})
}

// TestSyntheticSecretsShape checks the leaked credentials have the shape a
// scanner knows (so the task is real) and come from the generator (so two
// variants never share one).
func TestSyntheticSecretsShape(t *testing.T) {
	aws := regexp.MustCompile(`AKIA[A-Z0-9]{16}`)
	seen := map[string]string{}
	for _, v := range []string{"@0", "@1", "@2", "@3"} {
		task, err := Build("security/leaked_secrets" + v)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range task.Files {
			for _, k := range aws.FindAllString(f.Content, -1) {
				if k == "AKIAIOSFODNN7EXAMPLE" || k == "AKIAXXXXXXXXXXXXXXXX" {
					continue
				}
				if prev, ok := seen[k]; ok && prev != v {
					t.Errorf("key %s appears in variants %s and %s", k, prev, v)
				}
				seen[k] = v
			}
		}
	}
	if len(seen) == 0 {
		t.Error("no variant leaks an AWS key id")
	}
}

func TestWeakCipher(t *testing.T) {
	for _, tt := range []struct {
		ciphers     string
		strict, raw bool
	}{
		{"HIGH:!aNULL:!MD5:!RC4", false, true},
		{"ECDHE-RSA-AES128-GCM-SHA256:DES-CBC3-SHA", true, true},
		{"EECDH+AESGCM:-RC4", false, true},
		{"ECDHE-ECDSA-AES128-GCM-SHA256", false, false},
	} {
		if got := weakCipher(tt.ciphers, false); got != tt.strict {
			t.Errorf("weakCipher(%q, false) = %v, want %v", tt.ciphers, got, tt.strict)
		}
		if got := weakCipher(tt.ciphers, true); got != tt.raw {
			t.Errorf("weakCipher(%q, true) = %v, want %v", tt.ciphers, got, tt.raw)
		}
	}
}
