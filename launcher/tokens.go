package launcher

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
)

// The service's tokens (agentpen serve --token-file, or the variable
// --token-env names) are named: one "name:token" per line; a line whose
// first non-blank character is "#" is a comment, blank lines are
// ignored. The name is the launcher's (campaign.CheckOwner's grammar);
// OperatorName is reserved for the operator's token, which sees and acts
// on every campaign; every other token sees only the campaigns it
// created. A text of one line holding no ":" is a bare token: the
// operator's, as before tokens had names.

// OperatorName is the name of the operator's token: "operator:<token>"
// in a token file, and the name a bare token gets.
const OperatorName = "operator"

// ErrTokens is the kind of every refusal of a token file (*TokensError).
var ErrTokens = errors.New("token file refused")

// TokensError is a token text refused: where (From, the line from 1; 0
// for the text as a whole, whose Msg names From), the name on that line
// when it is one a message may show, and why. It never holds a token.
type TokensError struct {
	From string
	Line int
	Name string
	Msg  string
}

func (e *TokensError) Error() string {
	if e.Line == 0 {
		return e.Msg // it names From
	}
	at := e.From
	if e.Line > 0 {
		at += fmt.Sprintf(" line %d", e.Line)
	}
	if e.Name != "" {
		at += fmt.Sprintf(" (%q)", e.Name)
	}
	return at + ": " + e.Msg
}

// Unwrap makes every TokensError match ErrTokens.
func (e *TokensError) Unwrap() error { return ErrTokens }

// Tokens are the service's named tokens, as SHA-256 digests: the values
// are not kept. Build them with ParseTokens.
type Tokens struct {
	names   []string
	digests [][sha256.Size]byte
}

// ParseTokens reads a token text (a file's content, or a variable's
// value) named from in messages ("--token-file /etc/agentpen/tokens",
// "$AGENTPEN_SERVE_TOKEN"). Every token must pass the service's token
// policy (apikey.Token) and hold no whitespace or control character;
// names follow campaign.CheckOwner's grammar; a name or a token given
// twice is refused, as is a bare token beside named ones. A refusal is a
// *TokensError that names the line and the name, never a token (nor a
// name that would itself pass the token policy: a token written where
// the name goes).
func ParseTokens(from, text string) (*Tokens, error) {
	type line struct {
		n           int
		name, token string
		bare        bool
	}
	var lines []line
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, tok, named := strings.Cut(l, ":")
		if !named {
			lines = append(lines, line{n: i + 1, name: OperatorName, token: l, bare: true})
			continue
		}
		lines = append(lines, line{n: i + 1, name: name, token: tok})
	}
	pol := apikey.Token()
	// whole refuses the text as a whole: a variable in the words a
	// single token always was refused in.
	whole := func(st apikey.Status) error {
		msg := pol.Refusal(from, st)
		switch {
		case strings.HasPrefix(from, "$"):
		case !st.Present:
			msg = from + " holds no token; make one: " + apikey.MakeKey
		default:
			msg = from + " holds " + pol.Reason(st) + "; make one: " + apikey.MakeKey
		}
		return &TokensError{From: from, Msg: msg}
	}
	switch {
	case len(lines) == 0:
		return nil, whole(apikey.Status{})
	case len(lines) == 1 && lines[0].bare:
		// The one bare token: the operator's.
		if st := pol.Check(lines[0].token); !st.OK() {
			return nil, whole(st)
		}
		return &Tokens{names: []string{OperatorName}, digests: [][sha256.Size]byte{sha256.Sum256([]byte(lines[0].token))}}, nil
	}
	t := &Tokens{}
	seenName := map[string]int{}
	seenDigest := map[[sha256.Size]byte]int{}
	for _, l := range lines {
		e := &TokensError{From: from, Line: l.n}
		if l.bare {
			e.Msg = "a token without a name: a file of several tokens names each (name:token; the operator's is " + OperatorName + ":<token>)"
			return nil, e
		}
		if err := campaign.CheckOwner("name", l.name); err != nil {
			e.Msg = "the text before \":\" is not a launcher's name: a lower-case letter or digit, then up to 63 of lower-case letters, digits, - and _"
			return nil, e
		}
		if !pol.Check(l.name).OK() {
			// A name that would pass as a token may be one: never shown.
			e.Name = l.name
		}
		if prev, ok := seenName[l.name]; ok {
			e.Msg = fmt.Sprintf("the name is on line %d too: each launcher has one token", prev)
			return nil, e
		}
		seenName[l.name] = l.n
		if strings.IndexFunc(l.token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			e.Msg = "its token holds whitespace or a control character (a comment is a line of its own, starting with #)"
			return nil, e
		}
		if st := pol.Check(l.token); !st.OK() {
			if !st.Present {
				e.Msg = "no token after the name"
			} else {
				e.Msg = "its token is " + pol.Reason(st) + "; make one: " + apikey.MakeKey
			}
			return nil, e
		}
		d := sha256.Sum256([]byte(l.token))
		if prev, ok := seenDigest[d]; ok {
			e.Msg = fmt.Sprintf("its token is line %d's too: every launcher needs a token of its own", prev)
			return nil, e
		}
		seenDigest[d] = l.n
		t.names = append(t.names, l.name)
		t.digests = append(t.digests, d)
	}
	return t, nil
}

// Names are the tokens' names, in the text's order.
func (t *Tokens) Names() []string { return slices.Clone(t.names) }

// Len is how many tokens there are.
func (t *Tokens) Len() int { return len(t.names) }

// Lookup finds which token presented is, in constant time over all of
// them: the presented value is hashed and compared with every token's
// digest, none skipped, whether one matched already or not; so neither a
// token's value, its length nor its place in the file shows in the
// time taken.
func (t *Tokens) Lookup(presented string) (Caller, bool) {
	d := sha256.Sum256([]byte(presented))
	found := -1
	for i := range t.digests {
		eq := subtle.ConstantTimeCompare(d[:], t.digests[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Caller{}, false
	}
	return Caller{Name: t.names[found]}, true
}

// Caller is who sent a request: the name of the token it presented.
type Caller struct {
	Name string
}

// Operator reports whether the caller holds the operator's token.
func (c Caller) Operator() bool { return c.Name == OperatorName }

// Sees reports whether the caller may see and act on a campaign whose
// latest generation owner created (campaign.Generation.Owner; "" for a
// campaign agentpen up made, or one whose owner cannot be read): the
// operator sees every campaign, a launcher only its own.
func (c Caller) Sees(owner string) bool { return c.Operator() || (owner != "" && owner == c.Name) }

// withCaller is ctx for a request the caller sent.
func withCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey, c)
}

// CallerOf returns who sent the request ctx belongs to (false outside
// the routes behind the token: the service's own work, the proxy).
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey).(Caller)
	return c, ok
}
