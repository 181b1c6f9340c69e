package custody

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// Result is what Verify found: every check it made, by name.
type Result struct {
	// OK is true only when at least one check was made and every check
	// held.
	OK bool `json:"ok"`
	// KeyID is the key the signatures were verified with (KeyID).
	KeyID string `json:"key_id"`
	// Reports are the reports verified, in the journal's order.
	Reports []string `json:"reports"`
	// Checks are every check made, in order.
	Checks []Check `json:"checks"`
	// Failed are the ids of the checks that failed, in order.
	Failed []string `json:"failed"`
}

// Check is one check of a verification.
type Check struct {
	// ID names what was checked: "journal.chain", "journal.tail", or a
	// report's file name and an aspect of it ("attestation-1-1.json.
	// signature", ".envelope", ".statement", ".predicate", ".journal",
	// ".subject.<name>", ".follows").
	ID     string `json:"id"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Options scope a verification.
type Options struct {
	// Only names the one report to verify (its file name); the journal's
	// chain is checked too, and not what follows the report. Empty: every
	// report the journal records, and that nothing unexpected follows the
	// last.
	Only string
}

// Verify checks a campaign's custody in files, with the public key pub:
//   - the journal's chain (every record's sequence number, and the
//     SHA-256 of the line before it);
//   - for each report the journal records (or opts.Only): its envelope is
//     the one the journal recorded, signed by pub, holding an in-toto
//     Statement v1 of the report's predicate type whose predicate is the
//     report file; each subject's digest is that of its file (the
//     journal's, over the lines the subject covers), or, for an image, the
//     image id the report records; the report's journal record is the
//     line right after those lines, with the report's digest; its
//     generation and instance are the journal's; and a cleanup names the
//     last attestation of its generation before it (or none when the
//     generation was never attested);
//   - without opts.Only, that every record after the last one a verified
//     statement covers is expected there (a note; a rollback's record
//     after its cleanup).
//
// Every failure is a check that did not hold, named; nothing is skipped
// silently.
func Verify(ctx context.Context, files Files, pub ed25519.PublicKey, opts Options) *Result {
	v := &verification{res: &Result{KeyID: KeyID(pub), Reports: []string{}, Checks: []Check{}, Failed: []string{}}, files: files, pub: pub}
	journal, err := files.ReadFile(campaign.JournalFile, maxJournalBytes)
	if err != nil {
		v.add("journal.chain", false, "cannot read the journal: %v", err)
		return v.finish()
	}
	jc, err := campaign.ParseJournal(campaign.JournalFile, bytes.NewReader(journal))
	if err != nil {
		v.add("journal.chain", false, "%v", err)
	} else {
		v.add("journal.chain", true, "%d records, each following the one before (sequence and SHA-256 of its line)", len(jc.Records))
	}
	recs := jc.Records
	covered, found := 0, false
	for i, r := range recs {
		if _, ok := KindOf("", r.Op); !ok || r.Report == "" || (opts.Only != "" && r.Report != opts.Only) {
			continue
		}
		found = true
		covered = max(covered, v.report(ctx, recs, i, journal))
	}
	switch {
	case !found && opts.Only != "":
		v.add(opts.Only+".journal", false, "the journal records no report named %s", opts.Only)
	case !found:
		v.add("reports", false, "the journal records no report: nothing signed to verify")
	case opts.Only == "":
		v.tail(recs, covered, jc.Torn)
	}
	return v.finish()
}

type verification struct {
	res   *Result
	files Files
	pub   ed25519.PublicKey
}

func (v *verification) add(id string, ok bool, format string, args ...any) {
	v.res.Checks = append(v.res.Checks, Check{ID: id, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

func (v *verification) finish() *Result {
	for _, c := range v.res.Checks {
		if !c.OK {
			v.res.Failed = append(v.res.Failed, c.ID)
		}
	}
	v.res.OK = len(v.res.Checks) > 0 && len(v.res.Failed) == 0
	return v.res
}

// predicateHead is what Verify reads of any report.
type predicateHead struct {
	Generation int    `json:"generation"`
	Instance   string `json:"instance"`
	Images     []struct {
		Reference string `json:"reference"`
		ID        string `json:"id"`
	} `json:"images"`
}

// report verifies the report recs[i] records and returns the line number
// of that record when a statement signed by the key covers the journal
// up to it (0 otherwise).
func (v *verification) report(ctx context.Context, recs []campaign.Record, i int, journal []byte) int {
	rec := recs[i]
	name := rec.Report
	kind, ok := KindOf(name, rec.Op)
	if !ok {
		v.add(name+".journal", false, "record %d (%s) names %q, which is not a report of that kind", rec.Seq, rec.Op, name)
		return 0
	}
	v.res.Reports = append(v.res.Reports, name)
	report, rerr := v.files.ReadFile(name, maxFileBytes)
	// stop ends the checks of a report whose statement cannot be used,
	// naming a report file that cannot be read too.
	stop := func() int {
		if rerr != nil {
			v.add(name+".journal", false, "cannot read the report record %d journals: %v", rec.Seq, rerr)
		}
		return 0
	}

	// The envelope, as the journal recorded it.
	envName := store.EnvelopeName(name)
	env, err := v.files.ReadFile(envName, maxFileBytes)
	switch {
	case err != nil:
		v.add(name+".envelope", false, "cannot read %s: %v", envName, err)
		return stop()
	case rec.Envelope == "":
		v.add(name+".envelope", false, "record %d journals no digest of %s: the report was not signed when it was made", rec.Seq, envName)
	case digest(env) != rec.Envelope:
		v.add(name+".envelope", false, "%s has sha256 %s; record %d journalled %s: the envelope was changed", envName, digest(env), rec.Seq, rec.Envelope)
	default:
		v.add(name+".envelope", true, "%s is the envelope record %d journalled", envName, rec.Seq)
	}

	payload, err := Open(ctx, env, v.pub)
	if err != nil {
		v.add(name+".signature", false, "%s: %v", envName, err)
		return stop()
	}
	v.add(name+".signature", true, "%s is signed by key %s", envName, v.res.KeyID)

	st, journalN, problem := decodeStatement(payload, kind, name)
	if problem != "" {
		v.add(name+".statement", false, "%s", problem)
		return stop()
	}
	v.add(name+".statement", true, "an in-toto Statement v1 of %s with %d subjects", kind.PredicateType, len(st.Subject))

	var head predicateHead
	if err := json.Unmarshal(st.Predicate, &head); err != nil {
		v.add(name+".predicate", false, "the predicate is not a report: %v", err)
		return stop()
	}
	switch diffs, err := jsonDiff(st.Predicate, report, maxDiffs); {
	case rerr != nil:
		v.add(name+".predicate", false, "the report file cannot be read to compare: %v", rerr)
	case err != nil:
		v.add(name+".predicate", false, "the report file is not JSON: %v", err)
	case len(diffs) > 0:
		v.add(name+".predicate", false, "the report file is not the signed predicate: it was changed: %s", strings.Join(diffs, "; "))
	default:
		v.add(name+".predicate", true, "the report file is the signed predicate")
	}

	for _, s := range st.Subject {
		v.subject(name, s, journal, head)
	}

	// The report's record: the line right after those its statement
	// covers, with its digest, in the generation the journal began.
	var problems []string
	if rerr != nil {
		problems = append(problems, fmt.Sprintf("cannot read the report record %d journals: %v", rec.Seq, rerr))
	}
	if rec.Seq != journalN+1 {
		problems = append(problems, fmt.Sprintf("its record is line %d, not %d, the line after the %d the statement covers", rec.Seq, journalN+1, journalN))
	}
	if rerr == nil && rec.Digest != digest(report) {
		problems = append(problems, fmt.Sprintf("record %d journalled sha256 %s, the file has %s", rec.Seq, rec.Digest, digest(report)))
	}
	if rec.Digest != st.Subject[0].SHA256() {
		problems = append(problems, fmt.Sprintf("record %d journalled sha256 %s, the statement signed %s", rec.Seq, rec.Digest, st.Subject[0].SHA256()))
	}
	if _, f, _ := store.ParseReportName(name); f.Gen != head.Generation {
		problems = append(problems, fmt.Sprintf("the file's name says generation %d, the report %d", f.Gen, head.Generation))
	}
	if !begun(recs[:i], head.Generation, head.Instance) {
		problems = append(problems, fmt.Sprintf("the journal began no generation %d with instance %q before it", head.Generation, head.Instance))
	}
	if len(problems) > 0 {
		v.add(name+".journal", false, "%s", strings.Join(problems, "; "))
	} else {
		v.add(name+".journal", true, "record %d journals it (generation %d, instance %s), right after the %d lines its statement covers", rec.Seq, head.Generation, head.Instance, journalN)
	}

	switch kind.Name {
	case store.KindCleanup:
		v.follows(name, st, recs[:i], head.Generation)
	case store.KindAttestation:
		for _, r := range recs[:i] {
			if _, f, ok := store.ParseReportName(r.Report); ok && r.Op == campaign.OpCleanup && f.Gen == head.Generation {
				v.add(name+".follows", false, "journalled after %s, the cleanup of its generation %d", r.Report, f.Gen)
				break
			}
		}
	}
	if len(problems) > 0 {
		return 0
	}
	return rec.Seq
}

// decodeStatement reads a payload as a statement of kind about the report
// name, and returns how many journal lines it covers, or what is wrong.
func decodeStatement(payload []byte, kind Kind, name string) (Statement[json.RawMessage], int, string) {
	var st Statement[json.RawMessage]
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return st, 0, "the payload is not an in-toto statement: " + err.Error()
	}
	switch {
	case st.Type != StatementType:
		return st, 0, fmt.Sprintf("_type %q, not %q", st.Type, StatementType)
	case st.PredicateType != kind.PredicateType:
		return st, 0, fmt.Sprintf("predicate type %q, not %q", st.PredicateType, kind.PredicateType)
	case len(st.Predicate) == 0 || string(st.Predicate) == "null":
		return st, 0, "no predicate"
	case len(st.Subject) == 0:
		return st, 0, "no subject"
	case st.Subject[0].Name != name:
		return st, 0, fmt.Sprintf("its first subject is %q, not the report %s", st.Subject[0].Name, name)
	}
	seen := map[string]bool{}
	journalN := -1
	for _, s := range st.Subject {
		d := s.SHA256()
		if b, err := hex.DecodeString(d); err != nil || len(b) != 32 || strings.ToLower(d) != d {
			return st, 0, fmt.Sprintf("subject %q has no sha256 digest in lower-case hex", s.Name)
		}
		key := s.Name + "@" + d
		if s.Name == "" || seen[key] {
			return st, 0, fmt.Sprintf("subject %q is empty or named twice", s.Name)
		}
		seen[key] = true
		if s.Name == campaign.JournalFile {
			n, ok := annotationInt(s, AnnotationRecords)
			if !ok || journalN >= 0 {
				return st, 0, "the journal subject says no number of records, or is there twice"
			}
			journalN = n
		}
	}
	if journalN < 0 {
		return st, 0, "no subject names the journal"
	}
	return st, journalN, ""
}

func annotationInt(s Subject, key string) (int, bool) {
	f, ok := s.Annotations[key].(float64)
	if !ok || f < 0 || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

// subject checks one subject of the report name's statement.
func (v *verification) subject(name string, s Subject, journal []byte, head predicateHead) {
	id := name + ".subject." + s.Name
	want := s.SHA256()
	switch {
	case s.Name == campaign.JournalFile:
		n, _ := annotationInt(s, AnnotationRecords)
		if have := bytes.Count(journal, []byte{'\n'}); have < n {
			v.add(id, false, "the statement covers %d lines of the journal; it has %d: records were removed", n, have)
			return
		}
		if got := digest(journal[:lineEnd(journal, n)]); got != want {
			v.add(id, false, "its first %d lines have sha256 %s; the statement signed %s: a record was edited, removed or moved", n, got, want)
			return
		}
		v.add(id, true, "its first %d lines are the ones signed", n)
	case s.Annotations[AnnotationContainers] != nil:
		for _, im := range head.Images {
			if h, ok := sha256Hex(im.ID); ok && im.Reference == s.Name && h == want {
				v.add(id, true, "the image id the report records for %v (checked against the report; docker image inspect checks it on the daemon)", s.Annotations[AnnotationContainers])
				return
			}
		}
		v.add(id, false, "the report records no container running image %s with id sha256:%s", s.Name, want)
	default:
		b, err := v.files.ReadFile(s.Name, maxFileBytes)
		if err != nil {
			v.add(id, false, "cannot read it: %v", err)
			return
		}
		got := digest(b)
		if got != want {
			v.add(id, false, "sha256 %s; the statement signed %s: the file was changed (only its digest was signed: what changed in it cannot be named)", got, want)
			return
		}
		v.add(id, true, "sha256 %s, as signed", got)
	}
}

// follows checks that the cleanup name's statement names the last
// attestation of its generation before it (before), or none when there is
// none.
func (v *verification) follows(name string, st Statement[json.RawMessage], before []campaign.Record, gen int) {
	var named []Subject
	for _, s := range st.Subject {
		if k, _, ok := store.ParseReportName(s.Name); ok && k == store.KindAttestation {
			named = append(named, s)
		}
	}
	want, attested := Followed(before, gen)
	switch {
	case attested && (len(named) != 1 || named[0].Name != want.Report || named[0].SHA256() != want.Digest):
		v.add(name+".follows", false, "generation %d's last attestation before it is %s (sha256 %s); the statement names %v", gen, want.Report, want.Digest, subjectNames(named))
	case attested:
		v.add(name+".follows", true, "it follows %s, the last attestation of generation %d before it", want.Report, gen)
	case len(named) > 0:
		v.add(name+".follows", false, "the statement names %v, but the journal records no attestation of generation %d before it", subjectNames(named), gen)
	default:
		v.add(name+".follows", true, "generation %d was never attested (removed before its attestation)", gen)
	}
}

func subjectNames(ss []Subject) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// begun says whether recs begin generation gen with instance (a
// generation 0 report speaks for a journal that began none).
func begun(recs []campaign.Record, gen int, instance string) bool {
	if gen == 0 {
		return instance == ""
	}
	for _, r := range recs {
		if r.Op == campaign.OpBegin && r.Gen == gen {
			return r.Instance == instance
		}
	}
	return false
}

// tail checks what follows covered, the last record a verified statement
// covers (its report's record): only notes, warnings of a coming expiry
// (they change nothing of the campaign: agentpen serve journals them on
// its own), and a rollback's record right after its cleanup, may.
func (v *verification) tail(recs []campaign.Record, covered int, torn *campaign.TornTail) {
	if covered == 0 {
		v.add("journal.tail", false, "no verified statement covers the journal")
		return
	}
	var unexpected []string
	notes := 0
	last := campaign.Record{}
	for _, r := range recs {
		switch {
		case r.Seq == covered:
			last = r
		case r.Seq < covered:
		case r.Op == campaign.OpNote, r.Op == campaign.OpExpiring:
			notes++
		case r.Op == campaign.OpRolledBack && r.Seq == covered+1 && last.Op == campaign.OpCleanup:
		default:
			unexpected = append(unexpected, fmt.Sprintf("%d (%s)", r.Seq, r.Op))
		}
	}
	if torn != nil {
		unexpected = append(unexpected, "a final line without its newline ("+torn.String()+")")
	}
	if len(unexpected) > 0 {
		v.add("journal.tail", false, "after record %d, the last a verified statement covers (%s), come records no statement covers: %s (a campaign being brought up or removed, or records added since)",
			covered, last.Report, strings.Join(unexpected, ", "))
		return
	}
	v.add("journal.tail", true, "nothing but %d notes or expiry warnings follows record %d, the last a verified statement covers (%s)", notes, covered, last.Report)
}

// maxDiffs bounds the differences a changed report's check names.
const maxDiffs = 5

// jsonDiff says where b differs from the signed JSON value a (numbers
// compared by their text): at most max paths ("".checks[2].pass"), each
// with what was signed and what the file has, in a path's order (object
// keys sorted), then how many more; none when they are the same value.
func jsonDiff(a, b []byte, max int) ([]string, error) {
	decode := func(x []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		if d.More() {
			return nil, fmt.Errorf("more than one JSON value")
		}
		return v, nil
	}
	va, err := decode(a)
	if err != nil {
		return nil, err
	}
	vb, err := decode(b)
	if err != nil {
		return nil, err
	}
	var out []string
	more := 0
	say := func(path, format string, args ...any) {
		if len(out) == max {
			more++
			return
		}
		if path == "" {
			path = "."
		}
		out = append(out, path+": "+fmt.Sprintf(format, args...))
	}
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		switch xv := x.(type) {
		case map[string]any:
			if yv, ok := y.(map[string]any); ok {
				both := maps.Clone(xv)
				maps.Copy(both, yv)
				keys := slices.Sorted(maps.Keys(both))
				for _, k := range keys {
					p := path + "." + k
					if !jsonIdent.MatchString(k) {
						p = path + "[" + strconv.Quote(k) + "]"
					}
					xk, inX := xv[k]
					yk, inY := yv[k]
					switch {
					case !inY:
						say(p, "signed %s, the file has none", jsonText(xk))
					case !inX:
						say(p, "not signed, the file has %s", jsonText(yk))
					default:
						walk(p, xk, yk)
					}
				}
				return
			}
		case []any:
			if yv, ok := y.([]any); ok && len(xv) == len(yv) {
				for i := range xv {
					walk(fmt.Sprintf("%s[%d]", path, i), xv[i], yv[i])
				}
				return
			}
		}
		if !reflect.DeepEqual(x, y) {
			say(path, "signed %s, the file has %s", jsonText(x), jsonText(y))
		}
	}
	walk("", va, vb)
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return out, nil
}

// jsonIdent is an object key a path writes after a dot.
var jsonIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jsonText is v as JSON, clipped to 80 bytes ("..." ends a clipped one);
// an array or object of more than that is named by its kind and length.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	if len(b) <= 80 {
		return string(b)
	}
	switch v := v.(type) {
	case []any:
		return fmt.Sprintf("an array of %d", len(v))
	case map[string]any:
		return fmt.Sprintf("an object of %d keys", len(v))
	}
	return string(b[:77]) + "..."
}
