package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/internal/beneath"
)

// Campaign is one campaign's open state directory. Close it when done.
type Campaign struct {
	// ID is the campaign's id; Key its directory's name; Path the
	// directory's path.
	ID, Key, Path string
	dir           *beneath.Dir
	root          *Root

	// staged is the name (under the campaigns directory) of a new
	// campaign's directory until its first journal record puts it at
	// Path (Create); "" once it is there.
	mu     sync.Mutex
	staged string
}

// PlanOptions are what the campaign's plans are computed with (its
// root's agent-id key): a spec read back plans to the same names.
func (c *Campaign) PlanOptions() (campaign.PlanOptions, error) {
	opts, err := c.root.PlanOptions()
	// A campaign that exists was admitted by its runtime: deriving its
	// plan again holds it to no runtime's bound but the largest.
	opts.MaxWorkspaces = campaign.MaxPoolSlots
	return opts, err
}

// Close closes the directory. A new campaign's directory that never
// took a journal record (Create) is removed.
func (c *Campaign) Close() error {
	c.mu.Lock()
	staged := c.staged
	c.staged = ""
	c.mu.Unlock()
	err := c.dir.Close()
	if staged != "" {
		err = errors.Join(err, c.root.RemoveStaged(Staged{Key: c.Key, Name: staged}))
	}
	return err
}

// publish puts a new campaign's directory in place (see Create): renamed
// from its staging name to its key's, never over another, and the
// campaigns directory synced. An empty directory of the key without a
// journal (an older agentpen's create refused before it wrote one) is
// removed first.
func (c *Campaign) publish() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.staged == "" {
		return nil
	}
	r, from, to := c.root, campaignsDir+"/"+c.staged, campaignsDir+"/"+c.Key
	if err := c.dir.SyncParent(campaign.JournalFile); err != nil {
		return err
	}
	err := r.dir.Rename(from, to)
	if errors.Is(err, fs.ErrExist) {
		if entries, rerr := r.dir.ReadDir(to); rerr == nil && len(entries) == 0 {
			if err = r.dir.Remove(to); err == nil {
				err = r.dir.Rename(from, to)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("campaign %q: put its directory in place: %w", c.ID, err)
	}
	c.staged = ""
	return r.dir.SyncParent(to)
}

// State is what a campaign's journal says.
type State struct {
	campaign.Lifecycle
	// Torn is the journal's final line without its newline, a write that
	// did not complete, which reading ignored (nil for none); the next
	// OpenJournal cuts it.
	Torn *campaign.TornTail
}

// Read reads the campaign's journal and folds it. The error says why its
// state cannot be used (a corrupt journal, one another user owns or can
// write, one that cannot be read); the state is then what could be read,
// for listing only, with campaign.StatusUnusable.
func (c *Campaign) Read() (State, error) {
	recs, torn, err := c.Records()
	st := State{Lifecycle: campaign.Fold(recs), Torn: torn}
	if err != nil {
		st.Lifecycle.Status = campaign.StatusUnusable
	}
	return st, err
}

// Records reads the journal's records, and its torn final line (nil for
// none). With a *campaign.CorruptError the records are every well-formed
// line, for listing only.
func (c *Campaign) Records() ([]campaign.Record, *campaign.TornTail, error) {
	f, err := c.dir.Open(campaign.JournalFile)
	if err != nil {
		return nil, nil, fmt.Errorf("journal of %s: %w", c.Path, err)
	}
	defer f.Close()
	prev, _ := c.root.journals.get(c.Key)
	jc, err := campaign.ReadJournalAfter(f, c.dir.Join(campaign.JournalFile), prev)
	if err == nil {
		c.root.journals.put(c.Key, jc)
	}
	// The records kept are never changed: the caller gets a copy.
	return slices.Clone(jc.Records), jc.Torn, err
}

// JournalPath is the journal's path, for messages.
func (c *Campaign) JournalPath() string { return c.dir.Join(campaign.JournalFile) }

// OpenJournal opens the journal for appending (made 0600 when missing),
// cutting a torn final line (campaign.OpenJournal). The caller holds the
// campaign's lock and closes the journal.
func (c *Campaign) OpenJournal() (*campaign.Journal, error) {
	f, err := c.dir.OpenFile(campaign.JournalFile, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	prev, synced := c.root.journals.get(c.Key)
	j, jc, err := campaign.OpenJournalAfter(f, c.dir.Join(campaign.JournalFile), prev)
	if err != nil {
		return nil, err
	}
	c.root.journals.put(c.Key, jc)
	// Its directory entry is synced once per file: not again when this
	// root synced it and has read it on since (the same file).
	if fi := jc.FileInfo(); !jc.ReadOn() || synced == nil || !os.SameFile(synced, fi) {
		if err := c.dir.SyncParent(campaign.JournalFile); err != nil {
			j.Close()
			return nil, err
		}
		c.root.journals.markSynced(c.Key, fi)
	}
	c.mu.Lock()
	if c.staged != "" {
		j.OnFirstRecord(c.publish)
	}
	c.mu.Unlock()
	return j, nil
}

// MaxReportBytes bounds a report, or its envelope, read back (a report of
// a 256-workspace campaign is a few MB).
const MaxReportBytes = 64 << 20

// SpecFile is the name of generation gen's spec in a campaign's
// directory.
func SpecFile(gen int) string { return "spec-" + strconv.Itoa(gen) + ".json" }

// DaemonFile is the name of the record of the daemon generation gen was
// brought up on.
func DaemonFile(gen int) string { return "daemon-" + strconv.Itoa(gen) + ".json" }

// ReadFile reads the campaign's file name (its journal, a spec, a report,
// an envelope), at most max bytes, without following a link.
func (c *Campaign) ReadFile(name string, max int64) ([]byte, error) {
	return c.dir.ReadFile(name, max)
}

// WriteSpec writes the spec of generation gen, once.
func (c *Campaign) WriteSpec(gen int, spec campaign.CampaignSpec) error {
	return c.writeJSON(SpecFile(gen), spec)
}

// Spec reads the spec of generation gen.
func (c *Campaign) Spec(gen int) (campaign.CampaignSpec, error) {
	var spec campaign.CampaignSpec
	b, err := c.dir.ReadFile(SpecFile(gen), campaign.MaxSpecBytes)
	if err != nil {
		return spec, fmt.Errorf("campaign %s: spec of generation %d: %w", c.ID, gen, err)
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return spec, fmt.Errorf("campaign %s: %s: %w", c.ID, c.dir.Join(SpecFile(gen)), err)
	}
	return spec, nil
}

// SpecPath is the path of generation gen's spec, for messages.
func (c *Campaign) SpecPath(gen int) string { return c.dir.Join(SpecFile(gen)) }

// WriteDaemon records, once, the daemon generation gen is brought up on.
func (c *Campaign) WriteDaemon(gen int, d attest.DaemonRecord) error {
	return c.writeJSON(DaemonFile(gen), d)
}

// Daemon reads the daemon generation gen was brought up on; ok is false
// when none was recorded (a bring-up killed before it wrote it).
func (c *Campaign) Daemon(gen int) (d attest.DaemonRecord, ok bool, err error) {
	b, err := c.dir.ReadFile(DaemonFile(gen), 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return d, false, nil
	}
	if err != nil {
		return d, false, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, false, fmt.Errorf("%s: %w", c.dir.Join(DaemonFile(gen)), err)
	}
	return d, true, nil
}

func (c *Campaign) writeJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return c.dir.WriteNew(name, append(b, '\n'), 0o600)
}

// Report kinds: the first part of a report's file name.
const (
	KindAttestation = "attestation"
	KindCleanup     = "cleanup"
)

// ReportFile is a report written by WriteReport: its name in the
// campaign's directory and its SHA-256, for the journal to record.
type ReportFile struct {
	Name   string
	Digest string
	// Gen and N are the generation and the report's number among that
	// generation's reports of its kind.
	Gen, N int
}

// Path is the report's path under the campaign's directory dir.
func (f ReportFile) Path(dir string) string { return dir + "/" + f.Name }

var reportName = regexp.MustCompile(`^(attestation|cleanup)-([1-9][0-9]*)-([1-9][0-9]*)\.json$`)

// ParseReportName reads a report's file name
// (<kind>-<generation>-<n>.json); ok is false for any other name.
func ParseReportName(name string) (kind string, f ReportFile, ok bool) {
	m := reportName.FindStringSubmatch(name)
	if m == nil {
		return "", ReportFile{}, false
	}
	gen, err1 := strconv.Atoi(m[2])
	n, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil {
		return "", ReportFile{}, false
	}
	return m[1], ReportFile{Name: name, Gen: gen, N: n}, true
}

// EnvelopeName is the name of the signed statement of the report name
// (attestation-1-2.json: attestation-1-2.dsse.json), beside it.
func EnvelopeName(report string) string {
	return strings.TrimSuffix(report, ".json") + ".dsse.json"
}

// WriteEnvelope writes the signed statement (a DSSE envelope) of the
// report f beside it, once, synced, and returns its SHA-256 for the
// journal to record with the report's.
func (c *Campaign) WriteEnvelope(f ReportFile, envelope []byte) (string, error) {
	name := EnvelopeName(f.Name)
	if err := c.dir.WriteNew(name, envelope, 0o600); err != nil {
		return "", fmt.Errorf("write the statement of %s: %w", f.Name, err)
	}
	return digest(envelope), nil
}

// WriteReport writes a new report of kind for generation gen under the
// next free number (never over another file), synced, and returns its
// name and digest. The caller holds the campaign's lock and journals the
// name and digest (campaign.OpAttested, campaign.OpCleanup) once it
// returns: until then no reader takes it for a verdict.
func (c *Campaign) WriteReport(kind string, gen int, data []byte) (ReportFile, error) {
	have, err := c.Reports(kind)
	if err != nil {
		return ReportFile{}, err
	}
	n := 1
	for _, r := range have {
		if r.Gen == gen {
			n = max(n, r.N+1)
		}
	}
	for {
		f := ReportFile{Name: fmt.Sprintf("%s-%d-%d.json", kind, gen, n), Digest: digest(data), Gen: gen, N: n}
		err := c.dir.WriteNew(f.Name, data, 0o600)
		if errors.Is(err, fs.ErrExist) {
			n++ // a report its writer never journalled: kept as it is
			continue
		}
		if err != nil {
			return ReportFile{}, fmt.Errorf("write %s report: %w", kind, err)
		}
		return f, nil
	}
}

// Reports lists the campaign's report files of kind, oldest first (by
// generation, then number). Whether the journal names each is its
// reader's to check.
func (c *Campaign) Reports(kind string) ([]ReportFile, error) {
	entries, err := c.dir.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var out []ReportFile
	for _, e := range entries {
		m := reportName.FindStringSubmatch(e.Name())
		if m == nil || m[1] != kind || !e.Type().IsRegular() {
			continue
		}
		gen, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		out = append(out, ReportFile{Name: e.Name(), Gen: gen, N: n})
	}
	slices.SortFunc(out, func(a, b ReportFile) int {
		if a.Gen != b.Gen {
			return a.Gen - b.Gen
		}
		return a.N - b.N
	})
	return out, nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ErrReportTampered is returned (wrapped) for a report whose content is
// not what the journal recorded of it.
var ErrReportTampered = errors.New("report does not match the digest its journal recorded")

// readReport reads the report name, checking its digest against want.
func (c *Campaign) readReport(name, want string, v any) error {
	if !reportName.MatchString(name) {
		return fmt.Errorf("campaign %s: the journal names a report %q that is not a report's name", c.ID, name)
	}
	b, err := c.dir.ReadFile(name, MaxReportBytes)
	if err != nil {
		return err
	}
	if got := digest(b); got != want {
		return fmt.Errorf("%s: %w (sha256 %s, journalled %s)", c.dir.Join(name), ErrReportTampered, got, want)
	}
	return json.Unmarshal(b, v)
}

// Attestation reads the latest attestation of st's latest generation, as
// its journal names it; nil when it has none.
func (c *Campaign) Attestation(st State) (*attest.Report, error) {
	if st.AttestationReport == "" {
		return nil, nil
	}
	var rep attest.Report
	if err := c.readReport(st.AttestationReport, st.AttestationDigest, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Cleanup reads the last cleanup report since st's latest generation
// began, as its journal names it; nil when it has none.
func (c *Campaign) Cleanup(st State) (*cleanup.Report, error) {
	if st.CleanupReport == "" {
		return nil, nil
	}
	var rep cleanup.Report
	if err := c.readReport(st.CleanupReport, st.CleanupDigest, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// ReportPath is the path of a report file of the campaign.
func (c *Campaign) ReportPath(name string) string { return c.dir.Join(name) }
