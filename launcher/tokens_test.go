package launcher

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
)

// Tokens of the token-file tests: each passes the token policy.
const (
	tokOperator = "operator-tok-0123456789abcdef-7c1e9a3f"
	tokAlice    = "alice-tok-9f8e7d6c5b4a39281706-f5e4d3c2"
	tokBob      = "bob-tok-13579bdf02468ace13579bdf0246"
	// tokHex is a token that also matches a name's grammar: written
	// where a name goes, a refusal must not show it.
	tokHex = "9f1c0a7e3b5d24680123456789abcdef"
)

// tokenCases are token texts and what ParseTokens makes of them: the
// names, in order, or the refusal (its line, the name it shows, a part
// of its message). They seed FuzzParseTokens.
var tokenCases = []struct {
	name  string
	text  string
	names []string
	line  int
	shown string
	msg   string
}{
	{name: "bare", text: tokOperator, names: []string{"operator"}},
	{name: "bare_newline", text: tokOperator + "\n", names: []string{"operator"}},
	{name: "bare_with_comments_crlf", text: "# the service's token\r\n\r\n  " + tokOperator + "  \r\n# end\r\n", names: []string{"operator"}},
	{name: "named", text: "# launchers\noperator:" + tokOperator + "\n\nalice:" + tokAlice + "\n  # bob's cluster\nbob:" + tokBob + "\n", names: []string{"operator", "alice", "bob"}},
	{name: "named_no_operator", text: "alice:" + tokAlice + "\nbob:" + tokBob, names: []string{"alice", "bob"}},
	{name: "one_named", text: "team-a_2:" + tokAlice, names: []string{"team-a_2"}},
	{name: "name_64", text: strings.Repeat("a", 64) + ":" + tokAlice, names: []string{strings.Repeat("a", 64)}},
	{name: "token_with_colon", text: "alice:" + tokAlice + ":more", names: []string{"alice"}},

	{name: "empty", text: "", msg: "--token-file /x/tokens holds no token"},
	{name: "only_comments", text: "# nothing\n\n   # here\n", msg: "holds no token"},
	{name: "bare_short", text: "sh0rt-tok", msg: "--token-file /x/tokens holds a key shorter than 32 characters; make one: openssl rand -hex 32"},
	{name: "bare_placeholder", text: "changeme", msg: "placeholder"},
	{name: "bare_weak", text: strings.Repeat("ab", 20), msg: "weak key"},
	{name: "name_upper", text: "alice:" + tokAlice + "\nBob:" + tokBob, line: 2, msg: "not a launcher's name"},
	{name: "name_space", text: "bob smith:" + tokBob, line: 1, msg: "not a launcher's name"},
	{name: "name_too_long", text: strings.Repeat("a", 65) + ":" + tokAlice, line: 1, msg: "not a launcher's name"},
	{name: "name_empty", text: ":" + tokAlice, line: 1, msg: "not a launcher's name"},
	{name: "name_leading_dash", text: "-alice:" + tokAlice, line: 1, msg: "not a launcher's name"},
	{name: "duplicate_name", text: "alice:" + tokAlice + "\n# again\nalice:" + tokBob, line: 3, shown: "alice", msg: "on line 1 too"},
	{name: "duplicate_token", text: "alice:" + tokAlice + "\nbob:" + tokAlice, line: 2, shown: "bob", msg: "line 1's too"},
	{name: "short_token", text: "operator:" + tokOperator + "\nbob:sh0rt-tok", line: 2, shown: "bob", msg: "its token is a key shorter than 32 characters; make one: openssl rand -hex 32"},
	{name: "placeholder_token", text: "bob:your-api-key-goes-here-0123456789", line: 1, shown: "bob", msg: "placeholder"},
	{name: "weak_token", text: "bob:" + strings.Repeat("0123", 10), line: 1, shown: "bob", msg: "weak key"},
	{name: "no_token", text: "alice:" + tokAlice + "\nbob:", line: 2, shown: "bob", msg: "no token after the name"},
	{name: "trailing_comment", text: "bob:" + tokBob + "  # bob's", line: 1, shown: "bob", msg: "whitespace"},
	{name: "token_with_tab", text: "bob:" + tokBob[:10] + "\t" + tokBob[10:], line: 1, shown: "bob", msg: "whitespace"},
	{name: "bare_among_named", text: "alice:" + tokAlice + "\n" + tokBob, line: 2, msg: "a token without a name"},
	{name: "two_bare", text: tokAlice + "\n" + tokBob, line: 1, msg: "a token without a name"},
	{name: "swapped", text: tokHex + ":alice", line: 1, msg: "its token is a key shorter"},
}

// TestParseTokens: the names each text gives, or its refusal naming the
// line and the name (never one that could be a token), in a message that
// holds no token.
func TestParseTokens(t *testing.T) {
	for _, tt := range tokenCases {
		t.Run(tt.name, func(t *testing.T) {
			toks, err := ParseTokens("--token-file /x/tokens", tt.text)
			if tt.names != nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got := toks.Names(); !slices.Equal(got, tt.names) {
					t.Fatalf("names %q, want %q", got, tt.names)
				}
				return
			}
			var te *TokensError
			if !errors.As(err, &te) || !errors.Is(err, ErrTokens) {
				t.Fatalf("error %v (%T), want a *TokensError", err, err)
			}
			if te.Line != tt.line || te.Name != tt.shown || !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "--token-file /x/tokens") {
				t.Fatalf("refusal %q (line %d, name %q), want line %d, name %q, saying %q", err, te.Line, te.Name, tt.line, tt.shown, tt.msg)
			}
			for _, tok := range []string{tokOperator, tokAlice, tokBob, tokHex, "sh0rt-tok", strings.Repeat("0123", 10)} {
				if strings.Contains(err.Error(), tok) {
					t.Fatalf("the refusal %q holds a token", err)
				}
			}
		})
	}
}

// TestTokensLookup: each token is its own name's; the operator's alone
// is the operator; a near miss (a prefix, a longer one, another case, an
// empty one) is nobody's. A bare token is the operator's.
func TestTokensLookup(t *testing.T) {
	toks := mustTokens(t, "operator:"+tokOperator+"\nalice:"+tokAlice+"\nbob:"+tokBob)
	for tok, want := range map[string]string{tokOperator: "operator", tokAlice: "alice", tokBob: "bob"} {
		c, ok := toks.Lookup(tok)
		if !ok || c.Name != want || c.Operator() != (want == OperatorName) {
			t.Errorf("Lookup(%s...) = %+v %v, want %s", tok[:6], c, ok, want)
		}
	}
	for _, miss := range []string{"", tokAlice[:len(tokAlice)-1], tokAlice + "0", strings.ToUpper(tokAlice), "alice", "alice:" + tokAlice} {
		if c, ok := toks.Lookup(miss); ok {
			t.Errorf("Lookup(%q) = %+v", miss, c)
		}
	}
	bare := mustTokens(t, tokAlice)
	if c, ok := bare.Lookup(tokAlice); !ok || !c.Operator() {
		t.Errorf("a bare token: %+v %v", c, ok)
	}
}

// TestCallerSees: the operator sees every campaign, those agentpen up
// made (no owner) included; a launcher only its own.
func TestCallerSees(t *testing.T) {
	op, alice := Caller{Name: OperatorName}, Caller{Name: "alice"}
	for _, tt := range []struct {
		c     Caller
		owner string
		want  bool
	}{{op, "", true}, {op, "alice", true}, {op, "operator", true}, {alice, "alice", true}, {alice, "bob", false}, {alice, "", false}, {alice, "operator", false}, {Caller{}, "", false}} {
		if got := tt.c.Sees(tt.owner); got != tt.want {
			t.Errorf("%q sees %q: %v, want %v", tt.c.Name, tt.owner, got, tt.want)
		}
	}
}

// FuzzParseTokens: whatever the text, parsing never panics; a refusal
// is a *TokensError whose message holds nothing of the text that could
// be a token (any part that passes the token policy); a text accepted
// has names of the grammar, each once, and each named line's token finds
// its name.
func FuzzParseTokens(f *testing.F) {
	for _, tt := range tokenCases {
		f.Add(tt.text)
	}
	pol := apikey.Token()
	f.Fuzz(func(t *testing.T, text string) {
		toks, err := ParseTokens("tokens", text)
		var parts []string
		for _, l := range strings.Split(text, "\n") {
			l = strings.TrimSpace(l)
			name, tok, _ := strings.Cut(l, ":")
			parts = append(parts, l, name, tok, strings.TrimSpace(tok))
		}
		if err != nil {
			var te *TokensError
			if !errors.As(err, &te) {
				t.Fatalf("error %T %v", err, err)
			}
			for _, p := range parts {
				if pol.Check(p).OK() && strings.Contains(err.Error(), p) {
					t.Fatalf("refusal %q holds %q", err, p)
				}
			}
			return
		}
		names := toks.Names()
		if len(names) == 0 {
			t.Fatal("accepted with no token")
		}
		seen := map[string]bool{}
		for _, n := range names {
			if campaign.CheckOwner("name", n) != nil || seen[n] {
				t.Fatalf("name %q (names %q)", n, names)
			}
			seen[n] = true
		}
		if slices.Equal(names, []string{OperatorName}) && !strings.Contains(text, OperatorName+":") {
			return // a bare token
		}
		for _, l := range strings.Split(text, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			name, tok, _ := strings.Cut(l, ":")
			if c, ok := toks.Lookup(tok); !ok || c.Name != name {
				t.Fatalf("line %q: Lookup = %+v %v", l, c, ok)
			}
		}
	})
}
