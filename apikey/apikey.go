// Package apikey judges an API key without keeping it: whether it is
// present, whether it is a known placeholder or a publicly documented
// default, and its fingerprint (the first 16 hex digits of its SHA-256),
// which is all agentpen ever records or prints about a key.
//
// One Policy (the list of placeholder values and of public-default
// fingerprints) serves every check: agentpen up's refusal of a key before
// anything is created, and the attestation of the key the containers were
// given. It is pure (standard library only) and never logs, stores or
// returns a key's value; a Status holds only the fingerprint.
//
// Beyond that it judges a key's length (Policy.MinLength: 24 characters
// for the grader key, Default; 32 for the service's bearer token, Token)
// and its strength: too few distinct characters (MinDistinct: a repeated
// character always fails), or too few bits estimated from its length and
// the classes of characters it uses (MinBits). A long guessable phrase
// that is not on the list still passes: the estimate is a floor, not a
// proof. Refusal is the one message every refusal prints, ending with how
// to make a key (MakeKey).
package apikey

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultMinLength is the fewest characters Default accepts in a key.
const DefaultMinLength = 24

// DefaultMinDistinct is the fewest distinct characters either policy
// accepts.
const DefaultMinDistinct = 10

// TokenMinLength and TokenMinBits are Token's floor for a bearer token.
const (
	TokenMinLength = 32
	TokenMinBits   = 128
)

// Token returns the policy of agentpen serve's bearer tokens: Default's
// placeholders, at least TokenMinLength characters, DefaultMinDistinct
// distinct ones and TokenMinBits estimated bits (MakeKey's 64 hex digits
// carry 256).
func Token() Policy {
	p := Default()
	p.MinLength, p.MinBits = TokenMinLength, TokenMinBits
	return p
}

// MakeKey is the command every refusal names to make a key: 64 hex digits
// from the system's random source.
const MakeKey = "openssl rand -hex 32"

// FingerprintLen is the number of hex digits of a fingerprint.
const FingerprintLen = 16

// Fingerprint returns the first FingerprintLen hex digits of the SHA-256
// of v: enough to tell keys apart in a report, too short to help guess one.
func Fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])[:FingerprintLen]
}

var fingerprintRe = regexp.MustCompile(`^[0-9a-f]{16}$`)

// ValidFingerprint reports whether s has a fingerprint's shape (16
// lower-case hex digits).
func ValidFingerprint(s string) bool { return fingerprintRe.MatchString(s) }

// Policy says which keys are placeholders and how long a key must be. The
// zero Policy knows no placeholder and has no minimum; Default returns
// agentpen's.
type Policy struct {
	// MinLength is the fewest characters (runes) a key may have; 0 is no
	// minimum.
	MinLength int
	// MinDistinct is the fewest distinct characters a key may have (a key
	// of one repeated character, or of a few, is weak); 0 is no minimum.
	MinDistinct int
	// MinBits is the fewest bits a key may carry, estimated as its length
	// times log2 of the size of the character classes it uses (lower
	// case, upper case, digits, other printable ASCII, anything else); 0
	// is no minimum.
	MinBits int
	// Placeholders are values (compared lower-cased, trimmed) that name no
	// real key: "changeme", "your-api-key", ...
	Placeholders []string
	// PlaceholderPrefixes are lower-case prefixes of such values
	// ("replace-me...", "your_...").
	PlaceholderPrefixes []string
	// PublicDefaults are fingerprints (see Fingerprint) of keys published
	// in some project's documentation as an example. The key itself is
	// never kept in source.
	PublicDefaults []string
}

// Default returns agentpen's policy: at least DefaultMinLength characters,
// seed 004's placeholder list, the usual template spellings, agentpen's own
// variable names used as values, and the fingerprint of the public example
// key of the upstream CyberGym distribution. A fresh copy each call, so a
// caller may extend it.
func Default() Policy {
	return Policy{
		MinLength:   DefaultMinLength,
		MinDistinct: DefaultMinDistinct,
		Placeholders: []string{
			"placeholder", "changeme", "change-me", "change_me", "your_api_key", "your-api-key", "yourapikey",
			"api_key", "api-key", "apikey", "test-key", "test_key", "testkey", "none", "null", "nil",
			"undefined", "secret", "password", "xxx", "xxxx", "xxxxxxxx", "todo", "fixme", "dummy", "example",
			"<api-key>", "<api_key>", "<key>", "${cybergym_api_key}", "cybergym_api_key", "your-cybergym-api-key",
			"agentpen_api_key", "${agentpen_api_key}", "$agentpen_api_key", "your-agentpen-api-key",
		},
		PlaceholderPrefixes: []string{"replace_me", "replace-me", "replaceme", "your_", "your-", "<your", "${", "{{"},
		PublicDefaults:      []string{"9605ed570966a4e0"},
	}
}

// Status is what may be recorded about a key: never its value.
type Status struct {
	// Present is true for a non-empty value.
	Present bool `json:"present"`
	// Placeholder is true when the value is on the policy's list, starts
	// with one of its prefixes, or has a public default's fingerprint.
	Placeholder bool `json:"placeholder"`
	// Short is true when the value has fewer than the policy's MinLength
	// characters.
	Short bool `json:"short"`
	// Weak is true when the value has fewer distinct characters, or fewer
	// estimated bits, than the policy asks.
	Weak bool `json:"weak,omitempty"`
	// Fingerprint is Fingerprint(value); empty when the key is absent.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// OK reports whether the key may be used: present, not a placeholder and
// not short.
func (s Status) OK() bool { return s.Present && !s.Placeholder && !s.Short && !s.Weak }

// Check judges value. Only its Status leaves this function.
func (p Policy) Check(value string) Status {
	if value == "" {
		return Status{}
	}
	fp := Fingerprint(value)
	distinct, bits := Strength(value)
	return Status{Present: true, Placeholder: p.isPlaceholder(value, fp), Short: utf8.RuneCountInString(value) < p.MinLength,
		Weak: distinct < p.MinDistinct || int(bits) < p.MinBits, Fingerprint: fp}
}

// Strength returns how many distinct characters value has and the bits
// it carries, estimated as its length times log2 of the size of the
// character classes it draws from (26 lower case, 26 upper case, 10
// digits, 33 other printable ASCII, 1000 for anything else).
func Strength(value string) (distinct int, bits float64) {
	seen := map[rune]bool{}
	var lower, upper, digit, other, wide bool
	n := 0
	for _, r := range value {
		seen[r] = true
		n++
		switch {
		case 'a' <= r && r <= 'z':
			lower = true
		case 'A' <= r && r <= 'Z':
			upper = true
		case '0' <= r && r <= '9':
			digit = true
		case r < 0x7f:
			other = true
		default:
			wide = true
		}
	}
	size := 0
	for _, c := range []struct {
		used bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}, {wide, 1000}} {
		if c.used {
			size += c.size
		}
	}
	if size < 2 {
		return len(seen), 0
	}
	return len(seen), float64(n) * math.Log2(float64(size))
}

// Refusal says why the key a variable holds may not be used, in one
// sentence that ends with how to make one (MakeKey); "" when s is OK. It
// names the variable and, for a placeholder, the fingerprint, never the
// value.
func (p Policy) Refusal(variable string, s Status) string {
	var why string
	switch {
	case s.OK():
		return ""
	case !s.Present:
		why = variable + " is unset or empty"
	default:
		why = variable + " holds " + p.Reason(s)
	}
	return why + "; make one: export " + variable + "=$(" + MakeKey + ")"
}

// Reason says what is wrong with a key that is present and not OK, as a
// noun phrase ("a key shorter than 32 characters"), for a message that
// names the key its own way; "" when s is OK or the key is absent. Like
// Refusal, it names at most the fingerprint, never the value.
func (p Policy) Reason(s Status) string {
	switch {
	case s.OK(), !s.Present:
		return ""
	case s.Placeholder:
		return fmt.Sprintf("a placeholder or a publicly documented example key (fingerprint %s), not a real key", s.Fingerprint)
	case s.Short:
		return fmt.Sprintf("a key shorter than %d characters", p.MinLength)
	}
	why := fmt.Sprintf("a weak key: fewer than %d distinct characters", p.MinDistinct)
	if p.MinBits > 0 {
		why += fmt.Sprintf(", or fewer than %d bits estimated from its length and the kinds of characters it uses", p.MinBits)
	}
	return why
}

// IsPublicDefault reports whether fingerprint is one of the policy's
// public-default fingerprints (for evidence that carries only a digest).
func (p Policy) IsPublicDefault(fingerprint string) bool {
	return fingerprint != "" && slices.Contains(p.PublicDefaults, strings.ToLower(fingerprint))
}

func (p Policy) isPlaceholder(value, fp string) bool {
	v := strings.ToLower(strings.TrimSpace(value))
	if v == "" || p.IsPublicDefault(fp) || slices.Contains(p.Placeholders, v) {
		return true
	}
	for _, pre := range p.PlaceholderPrefixes {
		if strings.HasPrefix(v, pre) {
			return true
		}
	}
	return false
}
