package tasks

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// catalogueDomains are the eight domains the catalogue must have.
var catalogueDomains = []string{"software", "data", "logs", "config", "finance", "sql", "documents", "security"}

// TestCatalogueShape checks the catalogue has at least 48 families across
// exactly the eight domains, at least six in each, and that every listing
// entry is complete.
func TestCatalogueShape(t *testing.T) {
	t.Parallel()
	perDomain := map[string]int{}
	specs := Specs()
	for _, s := range specs {
		perDomain[s.Domain]++
		if s.ID != s.Domain+"/"+s.Family || s.Summary == "" {
			t.Errorf("%s: incomplete listing entry %+v", s.ID, s)
		}
		switch s.Kind {
		case KindCode, KindNumber, KindText, KindSet, KindList:
		default:
			t.Errorf("%s: unknown answer kind %q", s.ID, s.Kind)
		}
		if _, err := Lookup(s.ID); err != nil {
			t.Errorf("Lookup(%q): %v", s.ID, err)
		}
	}
	var short, unknown []string
	for _, d := range catalogueDomains {
		if perDomain[d] < 6 {
			short = append(short, fmt.Sprintf("%s has %d", d, perDomain[d]))
		}
	}
	for d := range perDomain {
		if indexOf(catalogueDomains, d) < 0 {
			unknown = append(unknown, d)
		}
	}
	if len(short) > 0 {
		t.Errorf("domains with fewer than 6 families: %s", strings.Join(short, ", "))
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		t.Errorf("domains outside the eight: %v", unknown)
	}
	if len(specs) < 48 {
		t.Errorf("the catalogue has %d families, want at least 48", len(specs))
	}
}

// TestCatalogueAnswerKinds checks the answer kinds of the catalogue cover
// every kind the grader knows.
func TestCatalogueAnswerKinds(t *testing.T) {
	t.Parallel()
	seen := map[Kind]bool{}
	for _, s := range Specs() {
		seen[s.Kind] = true
	}
	for _, k := range []Kind{KindCode, KindNumber, KindText, KindSet, KindList} {
		if !seen[k] {
			t.Errorf("no family has answer kind %q", k)
		}
	}
}

// TestBuildDeterministic builds every family twice, on variants 0 and 3,
// and requires identical tasks; the plain id and "@0" are the same task.
func TestBuildDeterministic(t *testing.T) {
	t.Parallel()
	for _, id := range IDs() {
		for _, v := range []int{0, 3} {
			vid := id + "@" + strconv.Itoa(v)
			a, err := Build(vid)
			if err != nil {
				t.Fatalf("Build(%q): %v", vid, err)
			}
			b, err := Build(vid)
			if err != nil {
				t.Fatalf("Build(%q): %v", vid, err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s: two builds differ", vid)
			}
			if len(a.Files) == 0 || a.Instruction == "" {
				t.Errorf("%s: no files or no instruction", vid)
			}
			for i, f := range a.Files {
				if i > 0 && a.Files[i-1].Path >= f.Path {
					t.Errorf("%s: files not sorted or duplicated at %q", vid, f.Path)
				}
				if f.Path == "" || strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") {
					t.Errorf("%s: file path %q is not a plain relative path", vid, f.Path)
				}
			}
			if v == 0 {
				plain, err := Build(id)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(plain, a) || plain.TaskID != id {
					t.Errorf("%s: the plain id and @0 build different tasks (TaskID %q)", id, plain.TaskID)
				}
			} else if a.TaskID != vid || a.Variant != v {
				t.Errorf("%s: TaskID %q, Variant %d", vid, a.TaskID, a.Variant)
			}
		}
	}
}

// TestVariantsDiffer requires at least 90% of the families to have a
// different answer key on variants 0 and 1, and every family to build
// different files.
func TestVariantsDiffer(t *testing.T) {
	t.Parallel()
	ids := IDs()
	var same []string
	for _, id := range ids {
		a, err := Build(id + "@0")
		if err != nil {
			t.Fatal(err)
		}
		b, err := Build(id + "@1")
		if err != nil {
			t.Fatal(err)
		}
		ka, _ := json.Marshal(a.Key)
		kb, _ := json.Marshal(b.Key)
		if string(ka) == string(kb) {
			same = append(same, id)
		}
		if reflect.DeepEqual(a.Files, b.Files) && reflect.DeepEqual(a.Visible, b.Visible) {
			t.Errorf("%s: variants 0 and 1 build the same files", id)
		}
	}
	if len(ids) == 0 {
		t.Fatal("empty catalogue")
	}
	if frac := 1 - float64(len(same))/float64(len(ids)); frac < 0.9 {
		t.Errorf("only %.0f%% of families change their answer between @0 and @1; the same: %v", frac*100, same)
	}
}

// answerLabel finds a line that presents something as the answer.
var answerLabel = regexp.MustCompile(`(?i)\b(answer|expected|solution|correct result)\b`)

// TestNoAnswerInFiles checks no non-code task gives its answer away in the
// workspace: no file named like an answer key, no line labelled as an answer
// that holds the answer, and no line that is exactly the whole set or list
// the key expects.
func TestNoAnswerInFiles(t *testing.T) {
	t.Parallel()
	for _, id := range IDs() {
		for _, v := range []int{0, 1} {
			task, err := Build(id + "@" + strconv.Itoa(v))
			if err != nil {
				t.Fatal(err)
			}
			if task.Kind == KindCode {
				for _, h := range task.Key.Hidden {
					if len(h.Args) == 0 {
						t.Errorf("%s: a hidden case without arguments", task.TaskID)
					}
				}
				continue
			}
			answers := task.Key.Items
			if task.Key.Answer != "" {
				answers = []string{task.Key.Answer}
			}
			for _, f := range task.Files {
				if answerLabel.MatchString(f.Path) || strings.Contains(strings.ToLower(f.Path), "key") {
					t.Errorf("%s: file %q is named like an answer key", task.TaskID, f.Path)
				}
				for n, line := range strings.Split(f.Content, "\n") {
					if answerLabel.MatchString(line) {
						for _, a := range answers {
							if a != "" && strings.Contains(NormalizeText(line), NormalizeText(a)) {
								t.Errorf("%s: %s:%d labels the answer %q: %q", task.TaskID, f.Path, n+1, a, line)
							}
						}
					}
					if len(task.Key.Items) > 1 {
						if c, _ := ScoreAnswer(task, line); c == 1 {
							t.Errorf("%s: %s:%d is the whole answer: %q", task.TaskID, f.Path, n+1, line)
						}
					}
				}
			}
		}
	}
}

// TestParseIDAndBuildErrors covers malformed and unknown ids.
func TestParseIDAndBuildErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		id          string
		wantFamily  string
		wantVariant int
		parseErr    bool // ParseID fails
		buildErr    bool // Build and Lookup fail
	}{
		{name: "plain", id: "software/median", wantFamily: "software/median"},
		{name: "variant_zero", id: "software/median@0", wantFamily: "software/median"},
		{name: "variant", id: "software/median@42", wantFamily: "software/median", wantVariant: 42},
		{name: "max_variant", id: "software/median@99999", wantFamily: "software/median", wantVariant: MaxVariant},
		{name: "too_large", id: "software/median@100000", parseErr: true, buildErr: true},
		{name: "huge", id: "software/median@99999999999999999999", parseErr: true, buildErr: true},
		{name: "not_a_number", id: "software/median@x", parseErr: true, buildErr: true},
		{name: "negative", id: "software/median@-1", parseErr: true, buildErr: true},
		{name: "leading_zeros", id: "software/median@007", parseErr: true, buildErr: true},
		{name: "plus_sign", id: "software/median@+1", parseErr: true, buildErr: true},
		{name: "space", id: "software/median@ 1", parseErr: true, buildErr: true},
		{name: "empty_variant", id: "software/median@", parseErr: true, buildErr: true},
		{name: "two_variants", id: "software/median@1@2", parseErr: true, buildErr: true},
		{name: "unknown_family", id: "software/no_such_family", wantFamily: "software/no_such_family", buildErr: true},
		{name: "unknown_with_variant", id: "nope/none@3", wantFamily: "nope/none", wantVariant: 3, buildErr: true},
		{name: "domain_only", id: "software", wantFamily: "software", buildErr: true},
		{name: "empty", id: "", buildErr: true},
		{name: "case_differs", id: "Software/Median", wantFamily: "Software/Median", buildErr: true},
		{name: "trailing_slash", id: "software/median/", wantFamily: "software/median/", buildErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			family, variant, err := ParseID(tt.id)
			if (err != nil) != tt.parseErr {
				t.Fatalf("ParseID(%q) error %v, want error %v", tt.id, err, tt.parseErr)
			}
			if err != nil && !errors.Is(err, ErrUnknownTask) {
				t.Errorf("ParseID(%q) error %v does not wrap ErrUnknownTask", tt.id, err)
			}
			if err == nil && (family != tt.wantFamily || variant != tt.wantVariant) {
				t.Errorf("ParseID(%q) = %q, %d, want %q, %d", tt.id, family, variant, tt.wantFamily, tt.wantVariant)
			}
			task, err := Build(tt.id)
			if (err != nil) != tt.buildErr {
				t.Fatalf("Build(%q) error %v, want error %v", tt.id, err, tt.buildErr)
			}
			if err != nil {
				if !errors.Is(err, ErrUnknownTask) || task != nil {
					t.Errorf("Build(%q) = %v, %v; want nil and an ErrUnknownTask", tt.id, task, err)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tt.id)) {
					t.Errorf("Build(%q) error %q does not name the id", tt.id, err)
				}
			} else if task.Variant != tt.wantVariant {
				t.Errorf("Build(%q).Variant = %d, want %d", tt.id, task.Variant, tt.wantVariant)
			}
			if _, err := Lookup(tt.id); (err != nil) != tt.buildErr {
				t.Errorf("Lookup(%q) error %v, want error %v", tt.id, err, tt.buildErr)
			}
		})
	}
}

// parseNumberTests are ParseNumber's table, also the seeds of
// FuzzParseNumber.
var parseNumberTests = []struct {
	name string
	in   string
	want float64
	ok   bool
}{
	{name: "integer", in: "42", want: 42, ok: true},
	{name: "spaces", in: "  42\n", want: 42, ok: true},
	{name: "decimal", in: "3.25", want: 3.25, ok: true},
	{name: "negative", in: "-7.5", want: -7.5, ok: true},
	{name: "plus", in: "+7", want: 7, ok: true},
	{name: "exponent", in: "1e3", want: 1000, ok: true},
	{name: "dollars", in: "$1,234.50", want: 1234.5, ok: true},
	{name: "euro_negative", in: "-€3", want: -3, ok: true},
	{name: "sign_after_currency", in: "€-3", want: -3, ok: true},
	{name: "pound", in: "£0.99", want: 0.99, ok: true},
	{name: "percent", in: "12 %", want: 12, ok: true},
	{name: "percent_tight", in: "-4.5%", want: -4.5, ok: true},
	{name: "unit_word", in: "42 ms", want: 42, ok: true},
	{name: "thousands", in: "1,234,567", want: 1234567, ok: true},
	{name: "leading_point", in: ".5", want: 0.5, ok: true},
	{name: "bad_grouping", in: "12,34", ok: false},
	{name: "bad_group_head", in: "1234,567", ok: false},
	{name: "empty", in: "", ok: false},
	{name: "blank", in: "   ", ok: false},
	{name: "word", in: "forty-two", ok: false},
	{name: "hex", in: "0x1F", ok: false},
	{name: "nan", in: "NaN", ok: false},
	{name: "inf", in: "Inf", ok: false},
	{name: "overflow", in: "1e999", ok: false},
	{name: "two_numbers", in: "1 2", ok: false},
	{name: "double_sign", in: "--3", ok: false},
	{name: "two_points", in: "1.2.3", ok: false},
	{name: "sign_only", in: "-", ok: false},
	{name: "currency_only", in: "$", ok: false},
	{name: "unit_before", in: "ms 42", ok: false},
}

func TestParseNumber(t *testing.T) {
	t.Parallel()
	for _, tt := range parseNumberTests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseNumber(tt.in)
			if ok != tt.ok || (ok && math.Abs(got-tt.want) > 1e-12) {
				t.Errorf("ParseNumber(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestNormalizeText(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{name: "case_and_space", in: "  The   Answer. ", want: "the answer"},
		{name: "quotes", in: `"payments-api"`, want: "payments-api"},
		{name: "single_quotes", in: "'x'", want: "x"},
		{name: "inner_punct_kept", in: "a.b, c", want: "a.b, c"},
		{name: "keeps_path", in: "/etc/app.conf", want: "/etc/app.conf"},
		{name: "keeps_underscore", in: "_private_", want: "_private_"},
		{name: "keeps_percent", in: "50%", want: "50%"},
		{name: "keeps_hash", in: "#42", want: "#42"},
		{name: "keeps_dash", in: "-x-", want: "-x-"},
		{name: "tabs_newlines", in: "a\tb\nc", want: "a b c"},
		{name: "only_punct", in: "...", want: ""},
		{name: "empty", in: "", want: ""},
		{name: "unicode_case", in: "ÉCOLE", want: "école"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeText(tt.in); got != tt.want {
				t.Errorf("NormalizeText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSplitItems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "commas", in: "a, b ,c", want: []string{"a", "b", "c"}},
		{name: "newlines", in: "A\nB\r\nC\n", want: []string{"a", "b", "c"}},
		{name: "semicolons", in: "x;y", want: []string{"x", "y"}},
		{name: "empty_items", in: ",,a,,\n,", want: []string{"a"}},
		{name: "quoted", in: `"a", 'b'`, want: []string{"a", "b"}},
		{name: "spaces_inside_kept", in: "oat milk, green tea", want: []string{"oat milk", "green tea"}},
		{name: "bullets_are_text", in: "- a\n- b", want: []string{"- a", "- b"}},
		{name: "nothing", in: " \n ", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SplitItems(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SplitItems(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// scoreAnswerTests are ScoreAnswer's table over hand-made keys, also the
// seeds of FuzzScoreAnswer.
var scoreAnswerTests = []struct {
	name   string
	kind   Kind
	key    Key
	answer string
	credit float64
	reason string
}{
	{name: "number_exact", kind: KindNumber, key: Key{Answer: "12.5", Tolerance: 0.01}, answer: "12.5", credit: 1, reason: ReasonCorrect},
	{name: "number_in_tolerance", kind: KindNumber, key: Key{Answer: "12.5", Tolerance: 0.01}, answer: "12.51", credit: 1, reason: ReasonCorrect},
	{name: "number_out_of_tolerance", kind: KindNumber, key: Key{Answer: "12.5", Tolerance: 0.01}, answer: "12.52", credit: 0, reason: ReasonWrongNumber},
	{name: "number_zero_tolerance_float", kind: KindNumber, key: Key{Answer: "0.3"}, answer: "0.30000000000000004", credit: 1, reason: ReasonCorrect},
	{name: "number_formatted", kind: KindNumber, key: Key{Answer: "1234.5"}, answer: "$1,234.50", credit: 1, reason: ReasonCorrect},
	{name: "number_unit", kind: KindNumber, key: Key{Answer: "250"}, answer: "250 ms", credit: 1, reason: ReasonCorrect},
	{name: "number_sentence", kind: KindNumber, key: Key{Answer: "250"}, answer: "the p95 is 250", credit: 0, reason: ReasonNotANumber},
	{name: "number_empty", kind: KindNumber, key: Key{Answer: "250"}, answer: "", credit: 0, reason: ReasonNotANumber},
	{name: "number_sign", kind: KindNumber, key: Key{Answer: "-3.2", Tolerance: 0.05}, answer: "3.2", credit: 0, reason: ReasonWrongNumber},
	{name: "text_normalised", kind: KindText, key: Key{Answer: "payments-api"}, answer: "  Payments-API. ", credit: 1, reason: ReasonCorrect},
	{name: "text_wrong", kind: KindText, key: Key{Answer: "payments-api"}, answer: "payments", credit: 0, reason: ReasonWrongText},
	{name: "text_inner_space", kind: KindText, key: Key{Answer: "Ada Park"}, answer: "ada   park", credit: 1, reason: ReasonCorrect},
	{name: "set_any_order", kind: KindSet, key: Key{Items: []string{"a", "b", "c"}}, answer: "c\nb, a", credit: 1, reason: ReasonCorrect},
	{name: "set_duplicates_ignored", kind: KindSet, key: Key{Items: []string{"a", "b"}}, answer: "a, a, b", credit: 1, reason: ReasonCorrect},
	{name: "set_missing", kind: KindSet, key: Key{Items: []string{"a", "b", "c", "d"}}, answer: "a, b, c", credit: 0.75, reason: ReasonMissing},
	{name: "set_extra", kind: KindSet, key: Key{Items: []string{"a", "b", "c"}}, answer: "a, b, c, d", credit: 0.75, reason: ReasonExtra},
	{name: "set_missing_extra", kind: KindSet, key: Key{Items: []string{"a", "b"}}, answer: "a, z", credit: 0.3333, reason: ReasonMissingExtra},
	{name: "set_empty_answer", kind: KindSet, key: Key{Items: []string{"a"}}, answer: " , ", credit: 0, reason: ReasonMissing},
	{name: "set_case", kind: KindSet, key: Key{Items: []string{"ORD-1", "ORD-2"}}, answer: "ord-1, Ord-2", credit: 1, reason: ReasonCorrect},
	{name: "list_right", kind: KindList, key: Key{Items: []string{"x", "y", "z"}}, answer: "x, y, z", credit: 1, reason: ReasonCorrect},
	{name: "list_order", kind: KindList, key: Key{Items: []string{"x", "y", "z"}}, answer: "z, y, x", credit: 0.3333, reason: ReasonOrder},
	{name: "list_short", kind: KindList, key: Key{Items: []string{"x", "y", "z"}}, answer: "x, y", credit: 0.6667, reason: ReasonWrongItems},
	{name: "list_long", kind: KindList, key: Key{Items: []string{"x", "y"}}, answer: "x, y, z", credit: 0.6667, reason: ReasonWrongItems},
	{name: "code_kind", kind: KindCode, key: Key{}, answer: "fixed it", credit: 0, reason: ReasonCodeKind},
}

func TestScoreAnswer(t *testing.T) {
	t.Parallel()
	for _, tt := range scoreAnswerTests {
		t.Run(tt.name, func(t *testing.T) {
			task := &Task{Spec: Spec{Kind: tt.kind}, Key: tt.key}
			credit, reason := ScoreAnswer(task, tt.answer)
			if credit != tt.credit || reason != tt.reason {
				t.Errorf("ScoreAnswer(%q) = %v, %q; want %v, %q", tt.answer, credit, reason, tt.credit, tt.reason)
			}
		})
	}
}

func TestScoreCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		visible, hidden []bool
		credit          float64
		reason          string
	}{
		{name: "all_pass", visible: []bool{true}, hidden: []bool{true, true}, credit: 1, reason: ReasonCorrect},
		{name: "example_fails", visible: []bool{true, false}, hidden: []bool{true, true}, credit: 0, reason: ReasonExamplesFail},
		{name: "hidden_partial", visible: []bool{true}, hidden: []bool{true, false, true, true}, credit: 0.75, reason: ReasonHiddenPartial},
		{name: "hidden_none_pass", visible: []bool{true}, hidden: []bool{false, false}, credit: 0, reason: ReasonHiddenPartial},
		{name: "no_hidden", visible: []bool{true}, hidden: nil, credit: 0, reason: ReasonNoCases},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			credit, reason := ScoreCode(tt.visible, tt.hidden)
			if credit != tt.credit || reason != tt.reason {
				t.Errorf("ScoreCode = %v, %q; want %v, %q", credit, reason, tt.credit, tt.reason)
			}
		})
	}
}

// fuzzKinds are the kinds FuzzScoreAnswer picks from by a byte.
var fuzzKinds = []Kind{KindNumber, KindText, KindSet, KindList, KindCode}

// FuzzScoreAnswer checks ScoreAnswer never panics, always gives a credit in
// [0, 1] with a non-empty reason, gives 1 only with ReasonCorrect, and gives
// a number task 0 or 1.
func FuzzScoreAnswer(f *testing.F) {
	for _, tt := range scoreAnswerTests {
		f.Add(byte(indexOfKind(tt.kind)), strings.Join(append([]string{tt.key.Answer}, tt.key.Items...), "\n"), tt.answer)
	}
	f.Fuzz(func(t *testing.T, kind byte, key, answer string) {
		k := fuzzKinds[int(kind)%len(fuzzKinds)]
		first, rest, _ := strings.Cut(key, "\n")
		task := &Task{Spec: Spec{Kind: k}, Key: Key{Answer: first, Items: strings.Split(rest, "\n"), Tolerance: 0.01}}
		credit, reason := ScoreAnswer(task, answer)
		if math.IsNaN(credit) || credit < 0 || credit > 1 || reason == "" {
			t.Fatalf("ScoreAnswer(%s key %q, %q) = %v, %q", k, key, answer, credit, reason)
		}
		if (credit == 1) != (reason == ReasonCorrect) {
			t.Fatalf("ScoreAnswer(%s key %q, %q) = %v with reason %q", k, key, answer, credit, reason)
		}
		if k == KindNumber && credit != 0 && credit != 1 {
			t.Fatalf("number credit %v", credit)
		}
	})
}

func indexOfKind(k Kind) int {
	for i, x := range fuzzKinds {
		if x == k {
			return i
		}
	}
	return 0
}

// FuzzParseNumber checks ParseNumber never panics and never returns NaN or
// an infinity, and that a number it reads reads the same after being
// formatted again.
func FuzzParseNumber(f *testing.F) {
	for _, tt := range parseNumberTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseNumber(s)
		if !ok {
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("ParseNumber(%q) = %v", s, v)
		}
		again, ok := ParseNumber(strconv.FormatFloat(v, 'g', -1, 64))
		if !ok || again != v {
			t.Fatalf("ParseNumber(%q) = %v, which does not read back (%v, %v)", s, v, again, ok)
		}
	})
}

// wrongAnswer is one family's plausible mistake and the reason it must be
// graded with.
type wrongAnswer struct {
	family string
	answer func(t *testing.T, task *Task) string
	reason string
}

// runWrongAnswers checks that every non-code family of domain has a row,
// that the key itself scores 1, and that each row's answer scores below 1
// with its reason, on several variants.
func runWrongAnswers(t *testing.T, domain string, rows []wrongAnswer) {
	t.Helper()
	byFamily := map[string]wrongAnswer{}
	for _, r := range rows {
		byFamily[domain+"/"+r.family] = r
	}
	for _, id := range IDs() {
		if !strings.HasPrefix(id, domain+"/") {
			continue
		}
		row, ok := byFamily[id]
		if !ok {
			t.Errorf("%s: no wrong-answer row", id)
			continue
		}
		delete(byFamily, id)
		t.Run(row.family, func(t *testing.T) {
			for _, v := range []int{0, 1, 2, 7} {
				task, err := Build(id + "@" + strconv.Itoa(v))
				if err != nil {
					t.Fatal(err)
				}
				if c, why := ScoreAnswer(task, keyAnswer(task)); c != 1 {
					t.Fatalf("%s: the key's own answer scores %v (%s)", task.TaskID, c, why)
				}
				answer := row.answer(t, task)
				c, why := ScoreAnswer(task, answer)
				if c >= 1 || why != row.reason {
					t.Errorf("%s: wrong answer %q scores %v (%q), want < 1 (%q); key %q %q",
						task.TaskID, answer, c, why, row.reason, task.Key.Answer, task.Key.Items)
				}
			}
		})
	}
	for id := range byFamily {
		t.Errorf("wrong-answer row for %s, which is not in the catalogue", id)
	}
}

// keyAnswer writes the key as an agent would answer.
func keyAnswer(task *Task) string {
	if task.Kind == KindSet || task.Kind == KindList {
		return strings.Join(task.Key.Items, ", ")
	}
	return task.Key.Answer
}

// runPartialSets checks that every set family of domain has at least two
// items, that a set answer missing one earns (n-1)/n with ReasonMissing, and
// that one extra item earns n/(n+1) with ReasonExtra; and that a list answer
// with its first two items swapped is graded as out of order.
func runPartialSets(t *testing.T, domain string) {
	t.Helper()
	for _, id := range IDs() {
		if !strings.HasPrefix(id, domain+"/") {
			continue
		}
		for v := range 5 {
			task, err := Build(id + "@" + strconv.Itoa(v))
			if err != nil {
				t.Fatal(err)
			}
			items := task.Key.Items
			switch task.Kind {
			case KindSet:
				n := len(items)
				if n < 2 {
					t.Errorf("%s: a set of %d items leaves no room for partial credit", task.TaskID, n)
					continue
				}
				partial := strings.Join(items[1:], "\n")
				if c, why := ScoreAnswer(task, partial); c != round4(float64(n-1)/float64(n)) || why != ReasonMissing {
					t.Errorf("%s: partial answer scores %v (%q), want %v (%q)", task.TaskID, c, why, round4(float64(n-1)/float64(n)), ReasonMissing)
				}
				extra := strings.Join(items, ", ") + ", not-an-item-42"
				if c, why := ScoreAnswer(task, extra); c != round4(float64(n)/float64(n+1)) || why != ReasonExtra {
					t.Errorf("%s: answer with an extra item scores %v (%q), want %v (%q)", task.TaskID, c, why, round4(float64(n)/float64(n+1)), ReasonExtra)
				}
			case KindList:
				if len(items) < 2 {
					t.Errorf("%s: a list of %d items has no order to get wrong", task.TaskID, len(items))
					continue
				}
				swapped := append([]string{items[1], items[0]}, items[2:]...)
				if c, why := ScoreAnswer(task, strings.Join(swapped, ", ")); c >= 1 || why != ReasonOrder {
					t.Errorf("%s: swapped list scores %v (%q), want < 1 (%q)", task.TaskID, c, why, ReasonOrder)
				}
			}
		}
	}
}

// csvRows reads a task's CSV file as rows keyed by header.
func csvRows(t *testing.T, task *Task, path string) []map[string]string {
	t.Helper()
	content, ok := task.File(path)
	if !ok {
		t.Fatalf("%s: no %s", task.TaskID, path)
	}
	recs, err := csv.NewReader(strings.NewReader(content)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("%s: %s: %v", task.TaskID, path, err)
	}
	var rows []map[string]string
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, h := range recs[0] {
			if i < len(rec) {
				row[h] = rec[i]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return f
}

// quoted returns the double-quoted value after prefix in s.
func quoted(t *testing.T, s, prefix string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, prefix+`"`)
	v, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		t.Fatalf("no %s\"...\" in %q", prefix, s)
	}
	return v
}

// TestManyVariants builds 150 variants of every family and checks each key
// is well formed: it grades itself 1, a number key parses, a set or list
// has at least two distinct items, and a code task has 5 to 10 hidden
// cases. Builders that retry draws would hang or panic here first.
func TestManyVariants(t *testing.T) {
	t.Parallel()
	for _, id := range IDs() {
		for v := range 150 {
			task, err := Build(id + "@" + strconv.Itoa(v))
			if err != nil {
				t.Fatal(err)
			}
			switch task.Kind {
			case KindCode:
				if n := len(task.Key.Hidden); n < 5 || n > 10 {
					t.Errorf("%s: %d hidden cases, want 5..10", task.TaskID, n)
				}
				continue
			case KindNumber:
				if _, ok := ParseNumber(task.Key.Answer); !ok {
					t.Errorf("%s: number key %q does not parse", task.TaskID, task.Key.Answer)
				}
			case KindSet, KindList:
				seen := map[string]bool{}
				for _, it := range task.Key.Items {
					n := NormalizeText(it)
					if seen[n] || n == "" || len(SplitItems(it)) != 1 {
						t.Errorf("%s: key item %q is empty, repeated or splits in two", task.TaskID, it)
					}
					seen[n] = true
				}
				if len(seen) < 2 {
					t.Errorf("%s: %d key items, want at least 2", task.TaskID, len(seen))
				}
			}
			if c, why := ScoreAnswer(task, keyAnswer(task)); c != 1 {
				t.Errorf("%s: the key's own answer scores %v (%s)", task.TaskID, c, why)
			}
		}
	}
}
