package episode

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// sendable returns text as valid UTF-8: a file name or output the agent
// chose would otherwise fail the observation's JSON encoding.
func sendable(text string) string { return strings.ToValidUTF8(text, "\uFFFD") }

// decodeReplace decodes bytes as UTF-8, each invalid byte becoming U+FFFD,
// as Python's errors="replace" does.
func decodeReplace(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			sb.WriteRune(utf8.RuneError)
			b = b[1:]
			continue
		}
		sb.Write(b[:n])
		b = b[n:]
	}
	return sb.String()
}

// clip cuts text to limit characters and says how many were cut; extra
// counts characters that were never read (output beyond the capture cap).
func clip(text string, limit int, extra int64) string {
	n := utf8.RuneCountInString(text)
	if n <= limit && extra == 0 {
		return text
	}
	cut := text
	if n > limit {
		i, count := 0, 0
		for i = range text {
			if count == limit {
				break
			}
			count++
		}
		if count < limit {
			i = len(text)
		}
		cut = text[:i]
	}
	more := int64(max(n-limit, 0)) + extra
	return cut + fmt.Sprintf("\n[... %d more characters not shown]", more)
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is Python's str.strip().
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

// splitLines is Python's str.splitlines(): lines without their endings.
func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n', '\v', '\f', '\x1c', '\x1d', '\x1e', '\u0085', '\u2028', '\u2029':
			lines = append(lines, s[start:i])
			i += n
			start = i
			continue
		case '\r':
			lines = append(lines, s[start:i])
			i += n
			if i < len(s) && s[i] == '\n' {
				i++
			}
			start = i
			continue
		}
		i += n
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// pyRepr renders a string as Python's repr() does, closely enough for
// messages.
func pyRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(quote):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || (!unicode.IsPrint(r) && r < 0x100):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// pyListRepr renders sorted names as a Python list of strings.
func pyListRepr(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = pyRepr(n)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
