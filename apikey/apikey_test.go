package apikey

import (
	"strings"
	"testing"
)

var checkCases = []struct {
	name        string
	value       string
	present     bool
	placeholder bool
}{
	{"empty", "", false, false},
	{"real", "k3y-0f-a-real-campaign-5b1c", true, false},
	{"changeme", "changeme", true, true},
	{"changeme_upper_spaced", "  CHANGEME ", true, true},
	{"template", "${AGENTPEN_API_KEY}", true, true},
	{"replace_me_prefix", "replace-me-with-your-key", true, true},
	{"your_prefix", "your_key_here", true, true},
	{"only_spaces", "   ", true, true},
	{"var_name_as_value", "AGENTPEN_API_KEY", true, true},
	{"angle", "<api-key>", true, true},
}

func TestCheck(t *testing.T) {
	p := Default()
	for _, tt := range checkCases {
		t.Run(tt.name, func(t *testing.T) {
			s := p.Check(tt.value)
			if s.Present != tt.present || s.Placeholder != tt.placeholder {
				t.Fatalf("Check = %+v, want present %v placeholder %v", s, tt.present, tt.placeholder)
			}
			if tt.present != ValidFingerprint(s.Fingerprint) {
				t.Fatalf("fingerprint %q", s.Fingerprint)
			}
			if v := strings.TrimSpace(tt.value); v != "" && strings.Contains(s.Fingerprint, v) {
				t.Fatalf("fingerprint holds the value")
			}
		})
	}
}

func TestPublicDefaultByFingerprint(t *testing.T) {
	p := Policy{PublicDefaults: []string{Fingerprint("the-documented-example-key")}}
	if !p.Check("the-documented-example-key").Placeholder {
		t.Fatal("a public default's fingerprint was not recognised")
	}
	if p.Check("another-key").Placeholder {
		t.Fatal("another key was called a placeholder")
	}
	if !p.IsPublicDefault(strings.ToUpper(Fingerprint("the-documented-example-key"))) || p.IsPublicDefault("") {
		t.Fatal("IsPublicDefault")
	}
	if !Default().IsPublicDefault("9605ed570966a4e0") {
		t.Fatal("the CyberGym example key's fingerprint is missing")
	}
}

func TestFingerprint(t *testing.T) {
	// sha256("abc") = ba7816bf8f01cfea414140de5dae2223...
	if got := Fingerprint("abc"); got != "ba7816bf8f01cfea" {
		t.Fatalf("Fingerprint(abc) = %q", got)
	}
	if Default().Check("abc").OK() != true || (Status{Present: true, Placeholder: true}).OK() {
		t.Fatal("OK")
	}
}

// FuzzCheck: whatever the value, the status never holds it, the
// fingerprint has its shape, and an empty value is absent.
func FuzzCheck(f *testing.F) {
	for _, tt := range checkCases {
		f.Add(tt.value)
	}
	p := Default()
	f.Fuzz(func(t *testing.T, v string) {
		s := p.Check(v)
		if s.Present != (v != "") {
			t.Fatalf("present %v for %q", s.Present, v)
		}
		if v == "" {
			if s != (Status{}) {
				t.Fatalf("empty value: %+v", s)
			}
			return
		}
		if !ValidFingerprint(s.Fingerprint) || s.Fingerprint != Fingerprint(v) {
			t.Fatalf("fingerprint %q", s.Fingerprint)
		}
		if len(v) >= 4 && strings.Contains(s.Fingerprint, v) {
			t.Fatalf("fingerprint %q holds the value %q", s.Fingerprint, v)
		}
	})
}
