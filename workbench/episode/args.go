package episode

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
)

// args are a tool call's arguments, each raw JSON.
type args map[string]json.RawMessage

// only refuses arguments other than allowed.
func (a args) only(allowed ...string) error {
	var extra []string
	for k := range a {
		ok := false
		for _, w := range allowed {
			ok = ok || k == w
		}
		if !ok {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	sort.Strings(allowed)
	allowedText := "none"
	if len(allowed) > 0 {
		allowedText = pyListRepr(allowed)
	}
	return refusef("unexpected argument(s) %s; allowed: %s", pyListRepr(extra), allowedText)
}

// str returns a string argument: whether it is present and a JSON string,
// and whether it held a lone surrogate (text UTF-8 cannot encode).
func (a args) str(key string) (s string, isString, lone bool) {
	raw, ok := a[key]
	if !ok {
		return "", false, false
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false, false
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, false
	}
	return s, true, hasLoneSurrogate(raw)
}

// intArg returns an integer argument, def when absent; anything but a JSON
// integer (a float, a bool, null, a string) is refused.
func (a args) intArg(key string, def int64) (int64, error) {
	raw, ok := a[key]
	if !ok {
		return def, nil
	}
	t := strings.TrimSpace(string(raw))
	digits := strings.TrimPrefix(t, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, refusef("'%s' must be an integer", key)
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil { // out of range: as far as any file goes
		n = math.MaxInt64 / 4
		if strings.HasPrefix(t, "-") {
			n = -n
		}
	}
	const bound = math.MaxInt64 / 4 // start + lines never overflows
	return max(-bound, min(bound, n)), nil
}

// answer returns the "answer" argument: a string, or a number as Python's
// str() writes it; empty or other answers are refused.
func (a args) answer() (string, error) {
	bad := refusef("'answer' must be a non-empty string")
	raw, ok := a["answer"]
	if !ok {
		return "", bad
	}
	t := strings.TrimSpace(string(raw))
	if s, isString, _ := a.str("answer"); isString {
		if pyStrip(s) == "" {
			return "", bad
		}
		return s, nil
	}
	if n, ok := pyNumber(t); ok {
		return n, nil
	}
	return "", bad
}

// pyNumber renders a JSON number literal as Python's str() of what
// json.loads makes of it: an int for a literal without '.', 'e' or 'E',
// else a float.
func pyNumber(lit string) (string, bool) {
	if lit == "" || !(lit[0] == '-' || lit[0] >= '0' && lit[0] <= '9') {
		return "", false
	}
	// A JSON number (json.Valid with a leading digit or minus); its value
	// may be out of float64 range, which json.loads makes inf.
	if !json.Valid([]byte(lit)) || strings.ContainsAny(lit, "\"[{ntf") {
		return "", false
	}
	if !strings.ContainsAny(lit, ".eE") {
		n := strings.TrimLeft(strings.TrimPrefix(lit, "-"), "0")
		if n == "" {
			return "0", true
		}
		if strings.HasPrefix(lit, "-") {
			n = "-" + n
		}
		return n, true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !math.IsInf(f, 0) {
		return "", false
	}
	return pyFloatRepr(f), true
}

// pyFloatRepr is Python's repr() of a float.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return mant + "e" + sign + strconv.Itoa(exp/10) + strconv.Itoa(exp%10)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// hasLoneSurrogate reports whether a JSON string literal escapes a
// surrogate that is not part of a pair.
func hasLoneSurrogate(raw []byte) bool {
	s := string(raw)
	hex4 := func(i int) (int, bool) {
		if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[i+2:i+6], 16, 32)
		return int(v), err == nil
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if i+1 < len(s) && s[i+1] != 'u' {
			i++
			continue
		}
		v, ok := hex4(i)
		if !ok {
			continue
		}
		switch {
		case v >= 0xD800 && v < 0xDC00:
			if w, ok := hex4(i + 6); ok && w >= 0xDC00 && w < 0xE000 {
				i += 11
				continue
			}
			return true
		case v >= 0xDC00 && v < 0xE000:
			return true
		}
		i += 5
	}
	return false
}
