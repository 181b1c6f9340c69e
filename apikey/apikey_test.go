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
	short       bool
}{
	{"empty", "", false, false, false},
	{"real", "k3y-0f-a-real-campaign-5b1c", true, false, false},
	{"exactly_24", "0123456789abcdef01234567", true, false, false},
	{"23_chars", "0123456789abcdef0123456", true, false, true},
	{"24_runes_48_bytes", "éàüöëïçñøåéàüöëïçñøåéàüö", true, false, false},
	{"short_real_looking", "k3y", true, false, true},
	{"changeme", "changeme", true, true, true},
	{"changeme_upper_spaced", "  CHANGEME ", true, true, true},
	{"template", "${AGENTPEN_API_KEY}", true, true, true},
	{"replace_me_prefix", "replace-me-with-your-key", true, true, false},
	{"your_prefix", "your_key_here", true, true, true},
	{"only_spaces", "   ", true, true, true},
	{"var_name_as_value", "AGENTPEN_API_KEY", true, true, true},
	{"angle", "<api-key>", true, true, true},
}

// TestWeak: a key of a repeated character (or a few), or one whose length
// and alphabet carry too few bits, is weak: 16 a's were accepted as the
// service's token, and a 24-rune repeat as a grader key.
func TestWeak(t *testing.T) {
	for _, tt := range []struct {
		name   string
		pol    Policy
		value  string
		weak   bool
		reason string
	}{
		{"grader_repeated", Default(), strings.Repeat("a", 30), true, "fewer than 10 distinct characters"},
		{"grader_repeated_wide", Default(), strings.Repeat("é", 24), true, "fewer than 10 distinct characters"},
		{"grader_nine_distinct", Default(), strings.Repeat("abcdefghi", 3), true, "fewer than 10 distinct characters"},
		{"grader_hex_24", Default(), "0123456789abcdef01234567", false, ""},
		{"token_repeated", Token(), strings.Repeat("a", 40), true, "fewer than 10 distinct characters"},
		{"token_hex_32", Token(), "0123456789abcdef0123456789abcdef", false, ""},
		{"token_hex_64", Token(), "9f1c0a7e3b5d2468" + "0123456789abcdef" + "fedcba9876543210" + "13579bdf02468ace", false, ""},
		// 32 digits carry 32*log2(10) = 106 bits, under 128.
		{"token_digits_32", Token(), "01234567890123456789012345678901", true, "fewer than 128 bits"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.pol.Check(tt.value)
			if st.Weak != tt.weak || st.OK() == tt.weak {
				t.Fatalf("Check = %+v, want weak %v", st, tt.weak)
			}
			if r := tt.pol.Refusal("AGENTPEN_SERVE_TOKEN", st); tt.weak && !strings.Contains(r, tt.reason) || strings.Contains(r, tt.value) {
				t.Fatalf("refusal %q, want it to say %q and never the key", r, tt.reason)
			}
		})
	}
	if Token().Check(strings.Repeat("0123456789abcdef", 1)).OK() {
		t.Fatal("a 16-character token accepted")
	}
}

func TestCheck(t *testing.T) {
	p := Default()
	for _, tt := range checkCases {
		t.Run(tt.name, func(t *testing.T) {
			s := p.Check(tt.value)
			if s.Present != tt.present || s.Placeholder != tt.placeholder || s.Short != tt.short {
				t.Fatalf("Check = %+v, want present %v placeholder %v short %v", s, tt.present, tt.placeholder, tt.short)
			}
			if s.OK() != (tt.present && !tt.placeholder && !tt.short) {
				t.Fatalf("OK = %v for %+v", s.OK(), s)
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
	if (Policy{}).Check("abc").OK() != true || Default().Check("abc").OK() || (Status{Present: true, Placeholder: true}).OK() {
		t.Fatal("OK")
	}
}

// TestRefusal: the exact sentence agentpen up and workbench grader print
// for a key they refuse.
func TestRefusal(t *testing.T) {
	p := Default()
	for _, tt := range []struct {
		name, value, want string
	}{
		{"ok", "0123456789abcdef0123456789abcdef", ""},
		{"unset", "", "AGENTPEN_API_KEY is unset or empty; make one: export AGENTPEN_API_KEY=$(openssl rand -hex 32)"},
		{"short", "cli-test-key-5d0c8e", "AGENTPEN_API_KEY holds a key shorter than 24 characters; make one: export AGENTPEN_API_KEY=$(openssl rand -hex 32)"},
		{"placeholder", "changeme", "AGENTPEN_API_KEY holds a placeholder or a publicly documented example key (fingerprint 057ba03d6c441048), not a real key; make one: export AGENTPEN_API_KEY=$(openssl rand -hex 32)"},
		{"long_placeholder", "replace-me-with-a-real-key-please", "AGENTPEN_API_KEY holds a placeholder or a publicly documented example key (fingerprint " + Fingerprint("replace-me-with-a-real-key-please") + "), not a real key; make one: export AGENTPEN_API_KEY=$(openssl rand -hex 32)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Refusal("AGENTPEN_API_KEY", p.Check(tt.value))
			if got != tt.want {
				t.Fatalf("Refusal =\n%s\nwant\n%s", got, tt.want)
			}
			if tt.value != "" && strings.Contains(got, tt.value) {
				t.Fatalf("the refusal repeats the value")
			}
		})
	}
}

// TestReason: the reason of a key that is present and refused is the
// phrase its Refusal gives after "holds"; none for a good or an absent
// key; never the value.
func TestReason(t *testing.T) {
	p := Token()
	for _, v := range []string{"", "0123456789abcdef0123456789abcdef", "changeme", "short-token", strings.Repeat("ab", 20)} {
		st := p.Check(v)
		r := p.Reason(st)
		if (r == "") != (st.OK() || !st.Present) {
			t.Errorf("%q: reason %q for status %+v", v, r, st)
		}
		if r != "" && (strings.Contains(r, v) || !strings.Contains(p.Refusal("X", st), "X holds "+r+";")) {
			t.Errorf("%q: reason %q, refusal %q", v, r, p.Refusal("X", st))
		}
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
