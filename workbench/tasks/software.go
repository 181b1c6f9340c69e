package tasks

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// softwareFamilies are code tasks: fix a planted bug in solution.py so the
// examples in test_solution.py and the hidden cases pass.
//
// Every family keeps its function name and its bug across variants (one
// oracle fixes them all); the variant draws the cases. Each family holds a Go
// model of the correct function and of the buggy one, and draws cases until
// at least one visible and two hidden cases tell them apart, so the planted
// bug is exercised in every variant, not only in the ones the tests build.
func softwareFamilies() []Family {
	return []Family{
		{
			Domain:  "software",
			Name:    "median",
			Kind:    KindCode,
			Summary: "fix median() so it handles lists of even length",
			Build:   buildMedian,
		},
		{
			Domain:  "software",
			Name:    "merge_intervals",
			Kind:    KindCode,
			Summary: "fix merge_intervals() so an interval inside another does not shrink the merged one",
			Build:   buildMergeIntervals,
		},
		{
			Domain:  "software",
			Name:    "top_words",
			Kind:    KindCode,
			Summary: "fix top_words() so words with the same count come in alphabetical order",
			Build:   buildTopWords,
		},
		{
			Domain:  "software",
			Name:    "parse_duration",
			Kind:    KindCode,
			Summary: "fix parse_duration() so numbers of more than one digit are read whole",
			Build:   buildParseDuration,
		},
		{
			Domain:  "software",
			Name:    "paginate",
			Kind:    KindCode,
			Summary: "fix paginate() so a short last page is returned",
			Build:   buildPaginate,
		},
		{
			Domain:  "software",
			Name:    "roman_to_int",
			Kind:    KindCode,
			Summary: "fix roman_to_int() so every subtractive pair (XL, XC, CD, CM...) is read",
			Build:   buildRomanToInt,
		},
		{
			Domain:  "software",
			Name:    "compare_versions",
			Kind:    KindCode,
			Summary: "fix compare_versions() so missing trailing components count as zero",
			Build:   buildCompareVersions,
		},
		{
			Domain:  "software",
			Name:    "business_days",
			Kind:    KindCode,
			Summary: "fix business_days() so the end date is counted",
			Build:   buildBusinessDays,
		},
	}
}

// codeInstruction is the common frame of a code task's instruction.
func codeInstruction(signature, contract string) string {
	return "solution.py defines " + signature + ". " + contract + " It is wrong for some inputs. Fix " +
		"solution.py (keep the function's name and arguments) so the examples in test_solution.py " +
		"(run: python3 test_solution.py) and the hidden cases pass, then submit a one-line note on " +
		"what you fixed as your answer."
}

// caseDrawer draws cases of one code family from its argument generator and
// its Go models of the correct and the buggy function.
type caseDrawer struct {
	correct, buggy func(args []any) any
}

// draw returns a case from gen; when exposing, one whose correct and buggy
// results differ (gen is retried; a family whose generator cannot expose the
// bug panics, which every test of the catalogue catches).
func (d caseDrawer) draw(gen func() []any, exposing bool) Case {
	for range 1000 {
		args := gen()
		want := d.correct(args)
		if !exposing || !jsonEqual(want, d.buggy(args)) {
			return Case{Args: args, Want: want}
		}
	}
	panic("tasks: a case generator cannot expose its family's bug")
}

// fixed returns the case for args as given.
func (d caseDrawer) fixed(args ...any) Case { return Case{Args: args, Want: d.correct(args)} }

func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// toInts reads a JSON-able list of integers built by a generator.
func toInts(v any) []int {
	switch xs := v.(type) {
	case []int:
		return append([]int(nil), xs...)
	case []any:
		out := make([]int, len(xs))
		for i, x := range xs {
			out[i] = x.(int)
		}
		return out
	}
	panic(fmt.Sprintf("tasks: not a list of ints: %T", v))
}

func buildMedian(r *Rand, _ int) Built {
	list := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = r.Range(-50, 200)
		}
		return out
	}
	median := func(xs []any) any {
		s := toInts(xs)
		sort.Ints(s)
		n := len(s)
		if n%2 == 1 {
			return s[n/2]
		}
		return float64(s[n/2-1]+s[n/2]) / 2
	}
	mk := func(n int) Case { xs := list(n); return Case{Args: []any{xs}, Want: median(xs)} }
	visible := []Case{mk(3), mk(5), mk(4)}
	hidden := []Case{mk(1), mk(2), mk(6), mk(7), mk(8), mk(10)}
	return Built{
		Instruction: codeInstruction("median(values)", "It should return the median of a non-empty list "+
			"of integers (the mean of the two middle values when the length is even)."),
		Files: map[string]string{
			"solution.py": `def median(values):
    """Return the median of a non-empty list of integers."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]
`,
		},
		Function: "median",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}

func buildMergeIntervals(r *Rand, _ int) Built {
	merge := func(buggy bool) func([]any) any {
		return func(args []any) any {
			var ivs [][]int
			for _, iv := range args[0].([]any) {
				ivs = append(ivs, toInts(iv))
			}
			sort.SliceStable(ivs, func(i, j int) bool { return ivs[i][0] < ivs[j][0] })
			merged := [][]int{}
			for _, iv := range ivs {
				if n := len(merged); n > 0 && iv[0] <= merged[n-1][1] {
					if buggy {
						merged[n-1][1] = iv[1]
					} else {
						merged[n-1][1] = max(merged[n-1][1], iv[1])
					}
					continue
				}
				merged = append(merged, []int{iv[0], iv[1]})
			}
			return merged
		}
	}
	d := caseDrawer{correct: merge(false), buggy: merge(true)}
	gen := func(n int) func() []any {
		return func() []any {
			ivs := make([]any, n)
			for i := range ivs {
				a := r.Range(0, 8*n)
				ivs[i] = []any{a, a + r.Range(0, 12)}
			}
			return []any{ivs}
		}
	}
	visible := []Case{d.draw(gen(3), false), d.draw(gen(4), true), d.draw(gen(5), false)}
	hidden := []Case{
		d.fixed([]any{}),
		d.draw(gen(1), false),
		d.fixed([]any{[]any{1, 3}, []any{3, 5}}),
		d.draw(gen(6), true),
		d.draw(gen(8), true),
		d.draw(gen(10), false),
		d.draw(gen(12), true),
	}
	return Built{
		Instruction: codeInstruction("merge_intervals(intervals)", "It takes a list of [start, end] "+
			"integer pairs (start <= end, in any order) and should return the union as a list of "+
			"non-overlapping [start, end] pairs sorted by start; intervals that overlap or touch "+
			"(one ends where the next starts) merge into one, and an empty list gives an empty list."),
		Files: map[string]string{
			"solution.py": `def merge_intervals(intervals):
    """Merge overlapping or touching [start, end] intervals."""
    ordered = sorted(intervals, key=lambda iv: iv[0])
    merged = []
    for start, end in ordered:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = end
        else:
            merged.append([start, end])
    return merged
`,
		},
		Function: "merge_intervals",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}

func buildTopWords(r *Rand, _ int) Built {
	pool := []string{"alpha", "beta", "cache", "delta", "error", "fetch", "graph", "host", "index",
		"job", "kernel", "log", "mesh", "node", "owner", "queue", "route", "shard", "token", "user",
		"vault", "worker", "zone", "build", "deploy", "metric", "proxy", "socket", "thread", "volume"}
	top := func(buggy bool) func([]any) any {
		return func(args []any) any {
			text, k := args[0].(string), args[1].(int)
			counts := map[string]int{}
			for _, w := range strings.FieldsFunc(strings.ToLower(text), func(c rune) bool { return c < 'a' || c > 'z' }) {
				counts[w]++
			}
			words := make([]string, 0, len(counts))
			for w := range counts {
				words = append(words, w)
			}
			sort.Slice(words, func(i, j int) bool {
				a, b := words[i], words[j]
				if counts[a] != counts[b] {
					return counts[a] > counts[b]
				}
				if buggy {
					return a > b
				}
				return a < b
			})
			out := [][]any{}
			for _, w := range words[:min(k, len(words))] {
				out = append(out, []any{w, counts[w]})
			}
			return out
		}
	}
	d := caseDrawer{correct: top(false), buggy: top(true)}
	gen := func(distinct int) func() []any {
		return func() []any {
			var tokens []string
			for _, w := range Sample(r, pool, distinct) {
				for range r.Range(1, 4) {
					tokens = append(tokens, w)
				}
			}
			Shuffle(r, tokens)
			var b strings.Builder
			for i, w := range tokens {
				if i > 0 {
					b.WriteString(Pick(r, []string{" ", " ", " ", ", ", ". ", " - "}))
				}
				if r.Chance(0.25) {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
				b.WriteString(w)
			}
			if r.Chance(0.5) {
				b.WriteString(".")
			}
			return []any{b.String(), r.Range(2, 4)}
		}
	}
	visible := []Case{d.draw(gen(4), false), d.draw(gen(5), true), d.draw(gen(6), false)}
	hidden := []Case{
		d.fixed("", 3),
		d.fixed("Queue queue QUEUE", 5),
		d.draw(gen(3), true),
		d.draw(gen(6), true),
		d.draw(gen(8), true),
		d.draw(gen(9), false),
		d.draw(gen(10), true),
	}
	return Built{
		Instruction: codeInstruction("top_words(text, k)", "It should return the k most frequent words "+
			"of text as a list of [word, count] pairs: words are runs of the letters a-z, compared "+
			"case-insensitively and returned in lower case; higher counts come first, words with the "+
			"same count are in alphabetical order, and fewer than k pairs come back when the text has "+
			"fewer distinct words."),
		Files: map[string]string{
			"solution.py": `import re
from collections import Counter


def top_words(text, k):
    """Return the k most frequent words of text as [word, count] pairs."""
    counts = Counter(re.findall(r"[a-z]+", text.lower()))
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    return [[word, count] for word, count in ranked[:k]]
`,
		},
		Function: "top_words",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}

func buildParseDuration(r *Rand, _ int) Built {
	units := []struct {
		name    string
		seconds int
	}{{"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}}
	parse := func(buggy bool) func([]any) any {
		return func(args []any) any {
			s := args[0].(string)
			total, num, digits := 0, 0, 0
			for _, c := range s {
				switch {
				case c >= '0' && c <= '9':
					num, digits = num*10+int(c-'0'), digits+1
					continue
				case c == ' ' && digits > 0:
					continue // the fixed pattern allows spaces between number and unit
				}
				for _, u := range units {
					if string(c) == u.name && digits > 0 {
						if buggy {
							num %= 10
						}
						total += num * u.seconds
					}
				}
				num, digits = 0, 0
			}
			return total
		}
	}
	d := caseDrawer{correct: parse(false), buggy: parse(true)}
	gen := func(long bool) func() []any {
		return func() []any {
			var parts []string
			for _, u := range units {
				if r.Chance(0.6) {
					hi := map[string]int{"d": 14, "h": 23, "m": 59, "s": 59}[u.name]
					v := r.Range(1, hi)
					if !long {
						v = r.Range(1, 9)
					}
					parts = append(parts, fmt.Sprintf("%d%s", v, u.name))
				}
			}
			if len(parts) == 0 {
				parts = []string{fmt.Sprintf("%ds", r.Range(10, 90))}
			}
			return []any{strings.Join(parts, Pick(r, []string{"", " "}))}
		}
	}
	visible := []Case{d.draw(gen(false), false), d.draw(gen(true), true), d.fixed("45s")}
	hidden := []Case{
		d.fixed(""),
		d.fixed("0s"),
		d.fixed(fmt.Sprintf("%dm", r.Range(100, 999))),
		d.draw(gen(true), true),
		d.draw(gen(true), true),
		d.draw(gen(false), false),
		d.draw(gen(true), false),
		d.draw(gen(true), true),
	}
	return Built{
		Instruction: codeInstruction("parse_duration(text)", "It should return the total number of "+
			"seconds in a duration string made of parts like \"2d\", \"4h\", \"30m\" and \"15s\" (units "+
			"d, h, m, s; parts may be separated by spaces; numbers may have several digits); an empty "+
			"string is 0."),
		Files: map[string]string{
			"solution.py": `import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Return the number of seconds in a duration such as "1h30m" or "2d 4h 5s"."""
    total = 0
    for number, unit in re.findall(r"(\d)\s*([dhms])", text):
        total += int(number) * UNITS[unit]
    return total
`,
		},
		Function: "parse_duration",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}

func buildPaginate(r *Rand, _ int) Built {
	page := func(buggy bool) func([]any) any {
		return func(args []any) any {
			items, p, per := args[0].([]any), args[1].(int), args[2].(int)
			start := (p - 1) * per
			end := start + per
			if start >= len(items) || (buggy && end > len(items)) {
				return []any{}
			}
			return items[start:min(end, len(items))]
		}
	}
	d := caseDrawer{correct: page(false), buggy: page(true)}
	names := []string{"ada", "bo", "cy", "dee", "eli", "fay", "gus", "hal", "ivy", "jo", "kai", "lu", "max", "ned", "oz", "pia"}
	gen := func(lastPage bool) func() []any {
		return func() []any {
			n := r.Range(3, 16)
			items := make([]any, n)
			strs := r.Chance(0.5)
			for i := range items {
				if strs {
					items[i] = Pick(r, names)
				} else {
					items[i] = r.Range(1, 500)
				}
			}
			per := r.Range(2, 6)
			pages := (n + per - 1) / per
			p := r.Range(1, pages)
			if lastPage {
				p = pages
			}
			return []any{items, p, per}
		}
	}
	visible := []Case{d.draw(gen(false), false), d.draw(gen(true), true), d.draw(gen(false), false)}
	hidden := []Case{
		d.fixed([]any{}, 1, 5),
		d.fixed([]any{1, 2, 3}, 1, 10),
		d.fixed([]any{1, 2, 3, 4}, 3, 2),
		d.draw(gen(true), true),
		d.draw(gen(true), true),
		d.draw(gen(false), false),
		d.draw(gen(false), false),
	}
	return Built{
		Instruction: codeInstruction("paginate(items, page, per_page)", "It should return the items "+
			"of page number page (pages are numbered from 1 and hold per_page items each, the last page "+
			"may hold fewer); a page past the end gives an empty list."),
		Files: map[string]string{
			"solution.py": `def paginate(items, page, per_page):
    """Return the items on page (1-based) when each page holds per_page items."""
    start = (page - 1) * per_page
    end = start + per_page
    if end > len(items):
        return []
    return items[start:end]
`,
		},
		Function: "paginate",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}

// toRoman writes 1..3999 in Roman numerals.
func toRoman(n int) string {
	vals := []int{1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1}
	syms := []string{"M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"}
	var b strings.Builder
	for i, v := range vals {
		for n >= v {
			b.WriteString(syms[i])
			n -= v
		}
	}
	return b.String()
}

func buildRomanToInt(r *Rand, _ int) Built {
	value := map[byte]int{'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}
	read := func(buggy bool) func([]any) any {
		return func(args []any) any {
			s := args[0].(string)
			total := 0
			for i := 0; i < len(s); i++ {
				v := value[s[i]]
				next := 0
				if i+1 < len(s) {
					next = value[s[i+1]]
				}
				if buggy {
					if s[i] == 'I' && (next == 5 || next == 10) {
						total += next - 1
						i++
						continue
					}
					total += v
					continue
				}
				if v < next {
					total -= v
				} else {
					total += v
				}
			}
			return total
		}
	}
	d := caseDrawer{correct: read(false), buggy: read(true)}
	gen := func(lo, hi int) func() []any { return func() []any { return []any{toRoman(r.Range(lo, hi))} } }
	visible := []Case{d.draw(gen(1, 39), false), d.draw(gen(40, 999), true), d.draw(gen(1000, 3999), false)}
	hidden := []Case{
		d.fixed("I"),
		d.fixed("MMMCMXCIX"),
		d.fixed("XLIV"),
		d.draw(gen(1, 3999), true),
		d.draw(gen(1, 3999), true),
		d.draw(gen(1, 3999), false),
		d.draw(gen(1, 100), false),
	}
	return Built{
		Instruction: codeInstruction("roman_to_int(numeral)", "It should return the value of a valid "+
			"upper-case Roman numeral from I to MMMCMXCIX (3999), subtractive pairs such as IV, IX, XL, "+
			"XC, CD and CM included."),
		Files: map[string]string{
			"solution.py": `VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def roman_to_int(numeral):
    """Return the integer value of an upper-case Roman numeral."""
    total = 0
    i = 0
    while i < len(numeral):
        if numeral[i] == "I" and i + 1 < len(numeral) and numeral[i + 1] in "VX":
            total += VALUES[numeral[i + 1]] - 1
            i += 2
        else:
            total += VALUES[numeral[i]]
            i += 1
    return total
`,
		},
		Function: "roman_to_int",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}

func buildCompareVersions(r *Rand, _ int) Built {
	parts := func(s string) []int {
		var out []int
		for _, p := range strings.Split(s, ".") {
			n := 0
			fmt.Sscanf(p, "%d", &n)
			out = append(out, n)
		}
		return out
	}
	cmpv := func(buggy bool) func([]any) any {
		return func(args []any) any {
			a, b := parts(args[0].(string)), parts(args[1].(string))
			if !buggy {
				for len(a) < len(b) {
					a = append(a, 0)
				}
				for len(b) < len(a) {
					b = append(b, 0)
				}
			}
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					if a[i] < b[i] {
						return -1
					}
					return 1
				}
			}
			switch {
			case len(a) < len(b):
				return -1
			case len(a) > len(b):
				return 1
			}
			return 0
		}
	}
	d := caseDrawer{correct: cmpv(false), buggy: cmpv(true)}
	version := func() []int {
		v := make([]int, r.Range(2, 3))
		for i := range v {
			v[i] = Pick(r, []int{0, 1, 2, 3, 9, 10, 11, 12, 20, 100})
		}
		return v
	}
	join := func(v []int) string {
		s := make([]string, len(v))
		for i, n := range v {
			s[i] = fmt.Sprint(n)
		}
		return strings.Join(s, ".")
	}
	gen := func(trailing bool) func() []any {
		return func() []any {
			a := version()
			b := append([]int(nil), a...)
			switch {
			case trailing:
				b = append(b, 0)
				if r.Chance(0.5) {
					b = append(b, Pick(r, []int{0, 0, 1, 4}))
				}
			case r.Chance(0.7):
				b[r.IntN(len(b))] = Pick(r, []int{0, 2, 9, 10, 11, 30})
			default:
				b = version()
			}
			if r.Chance(0.5) {
				a, b = b, a
			}
			return []any{join(a), join(b)}
		}
	}
	visible := []Case{d.draw(gen(false), false), d.draw(gen(true), true), d.fixed("1.10", "1.9")}
	hidden := []Case{
		d.fixed("1.0", "1"),
		d.fixed("2.0.1", "2"),
		d.fixed("0.9.9", "0.10"),
		d.draw(gen(true), true),
		d.draw(gen(true), true),
		d.draw(gen(false), false),
		d.draw(gen(false), false),
		d.draw(gen(true), false),
	}
	return Built{
		Instruction: codeInstruction("compare_versions(a, b)", "a and b are version strings of "+
			"dot-separated non-negative integers, such as \"1.10.2\"; it should return -1 when a is "+
			"older than b, 1 when it is newer and 0 when they are the same version. Components compare "+
			"as numbers, left to right, and a missing component counts as 0 (\"1.2\" equals \"1.2.0\")."),
		Files: map[string]string{
			"solution.py": `def compare_versions(a, b):
    """Compare dotted version strings: -1 if a < b, 0 if equal, 1 if a > b."""
    pa = [int(part) for part in a.split(".")]
    pb = [int(part) for part in b.split(".")]
    if pa < pb:
        return -1
    if pa > pb:
        return 1
    return 0
`,
		},
		Function: "compare_versions",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}

func buildBusinessDays(r *Rand, _ int) Built {
	const layout = "2006-01-02"
	count := func(buggy bool) func([]any) any {
		return func(args []any) any {
			first, _ := time.Parse(layout, args[0].(string))
			last, _ := time.Parse(layout, args[1].(string))
			off := map[string]bool{}
			for _, h := range args[2].([]any) {
				off[h.(string)] = true
			}
			n := 0
			for day := first; day.Before(last) || (!buggy && day.Equal(last)); day = day.AddDate(0, 0, 1) {
				if wd := day.Weekday(); wd != time.Saturday && wd != time.Sunday && !off[day.Format(layout)] {
					n++
				}
			}
			return n
		}
	}
	d := caseDrawer{correct: count(false), buggy: count(true)}
	base := time.Date(2023+r.IntN(3), time.January, 1, 0, 0, 0, 0, time.UTC)
	gen := func(maxSpan int) func() []any {
		return func() []any {
			start := base.AddDate(0, 0, r.Range(0, 360))
			end := start.AddDate(0, 0, r.Range(0, maxSpan))
			holidays := []any{}
			for range r.Range(0, 3) {
				holidays = append(holidays, start.AddDate(0, 0, r.Range(0, maxSpan)).Format(layout))
			}
			return []any{start.Format(layout), end.Format(layout), holidays}
		}
	}
	// A Saturday to the Sunday after it: no weekday at all.
	sat := base
	for sat.Weekday() != time.Saturday {
		sat = sat.AddDate(0, 0, 1)
	}
	mon := sat.AddDate(0, 0, 2)
	visible := []Case{d.draw(gen(20), false), d.draw(gen(30), true), d.draw(gen(12), false)}
	hidden := []Case{
		d.fixed(sat.Format(layout), sat.AddDate(0, 0, 1).Format(layout), []any{}),
		d.fixed(mon.Format(layout), mon.Format(layout), []any{}),
		d.fixed(mon.AddDate(0, 0, 7).Format(layout), mon.Format(layout), []any{}),
		d.fixed(mon.Format(layout), mon.AddDate(0, 0, 6).Format(layout), []any{sat.Format(layout), mon.AddDate(0, 0, 2).Format(layout)}),
		d.draw(gen(60), true),
		d.draw(gen(90), true),
		d.draw(gen(40), false),
	}
	return Built{
		Instruction: codeInstruction("business_days(start, end, holidays)", "start and end are ISO "+
			"dates (\"YYYY-MM-DD\") and holidays a list of ISO dates; it should return how many days "+
			"from start to end, both included, fall on Monday to Friday and are not holidays (0 when "+
			"end is before start; a holiday on a weekend changes nothing)."),
		Files: map[string]string{
			"solution.py": `from datetime import date, timedelta


def business_days(start, end, holidays):
    """Count the weekdays from start to end (ISO dates, both included) that are not holidays."""
    first = date.fromisoformat(start)
    last = date.fromisoformat(end)
    off = {date.fromisoformat(day) for day in holidays}
    count = 0
    day = first
    while day < last:
        if day.weekday() < 5 and day not in off:
            count += 1
        day += timedelta(days=1)
    return count
`,
		},
		Function: "business_days",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}
