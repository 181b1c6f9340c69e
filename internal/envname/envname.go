// Package envname says what names an environment variable in agentpen's
// specs and flags: a letter or an underscore, then letters, digits and
// underscores, at most 128 bytes. It imports nothing, so the workbench
// binary checks its flags without the campaign package (and what that
// brings: its start-up costs the idle server memory).
package envname

// Pattern is Valid's rule as a regular expression.
const Pattern = `^[A-Za-z_][A-Za-z0-9_]{0,127}$`

// Valid reports whether s names an environment variable (Pattern).
func Valid(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
