package envname

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidIsPattern: Valid accepts exactly what Pattern matches.
func TestValidIsPattern(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	for _, s := range []string{"", "A", "_", "a1", "1a", "GRADER_KEY", "x-y", "x y", "é", "A\x00", "a.b",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "Z9_", "_9", "9"} {
		if Valid(s) != re.MatchString(s) {
			t.Errorf("%q: Valid %v, Pattern %v", s, Valid(s), re.MatchString(s))
		}
	}
}
