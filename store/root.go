package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/beneath"
)

// ErrStateRoot is the kind of error (wrapped) for a state root agentpen
// cannot use: not a directory, unreadable, or owned or writable by another
// user (then also a *campaign.TrustError).
var ErrStateRoot = errors.New("unusable state root")

// ErrNoCampaign is returned (wrapped) when the state root has no journal
// for a campaign id.
var ErrNoCampaign = errors.New("no such campaign")

// stateRootHint ends the errors about a state root.
const stateRootHint = "(--state-root names the directory that holds the campaigns' state)"

// Root is an open state root. Close it when done.
type Root struct {
	path string
	// dir is the root's directory; nil for a root opened for reading that
	// does not exist (it holds no campaign).
	dir *beneath.Dir
	// journals is what the root last read of each campaign's journal.
	journals journals
}

// OpenRoot opens the state root at path for reading: one that does not
// exist holds no campaign (and is not made). The root, and its campaigns
// directory when there is one, are checked before anything is read.
func OpenRoot(path string) (*Root, error) {
	d, err := beneath.Open(path, trusted("state root", path))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Root{path: path}, nil
	case err != nil:
		return nil, rootError(path, err)
	}
	r := &Root{path: path, dir: d}
	if err := r.checkCampaigns(); err != nil {
		d.Close()
		return nil, err
	}
	return r, nil
}

// CreateRoot opens the state root at path, making it (0700, with its
// parents) when missing, for bring-ups and the service.
func CreateRoot(path string) (*Root, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, rootError(path, err)
	}
	r, err := OpenRoot(path)
	if err != nil {
		return nil, err
	}
	if r.dir == nil {
		return nil, rootError(path, errors.New("vanished after it was made"))
	}
	return r, nil
}

func rootError(path string, err error) error {
	var te *campaign.TrustError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: %w", ErrStateRoot, err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%w %s: %v %s", ErrStateRoot, path, err, stateRootHint)
}

// trusted is the check of a directory agentpen keeps state in.
func trusted(what, path string) func(fs.FileInfo) error {
	return func(fi fs.FileInfo) error { return campaign.CheckPrivate(what, path, fi, true) }
}

// checkCampaigns checks the campaigns directory, when there is one.
func (r *Root) checkCampaigns() error {
	fi, err := r.dir.Lstat(campaignsDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return rootError(r.path, err)
	}
	if err := campaign.CheckPrivate("state root", r.dir.Join(campaignsDir), fi, true); err != nil {
		return fmt.Errorf("%w: %w", ErrStateRoot, err)
	}
	return nil
}

// campaignsDir is the campaigns' directory under the root.
const campaignsDir = "campaigns"

// Path returns the state root's path.
func (r *Root) Path() string { return r.path }

// Close closes the root.
func (r *Root) Close() error {
	if r.dir == nil {
		return nil
	}
	return r.dir.Close()
}

// CampaignDir is the path of a campaign's state directory (it may not
// exist), for messages.
func (r *Root) CampaignDir(id string) string {
	return filepath.Join(r.path, campaignsDir, campaign.Key(id))
}

// Open opens the campaign id's state directory: the id is validated, the
// directory checked (a *campaign.TrustError for one another user owns or
// can write), and it must hold a journal (ErrNoCampaign otherwise).
func (r *Root) Open(id string) (*Campaign, error) {
	if err := campaign.CheckID("campaign_id", id); err != nil {
		return nil, err
	}
	if r.dir == nil {
		return nil, noCampaign(id, r.CampaignDir(id))
	}
	c, err := r.openKey(campaign.Key(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noCampaign(id, r.CampaignDir(id))
	}
	if err != nil {
		return nil, err
	}
	c.ID = id
	return c, nil
}

// Create opens the campaign id's state directory for a bring-up. The
// caller holds the campaign's lock (Locks.Campaign). A campaign that has
// a journal is opened for its next generation. A new one is made one
// step on disk: its directory is made 0700 under a name of its own
// (.create.<key>.<nonce>, which nothing lists), its files go there, and
// the first record its journal takes puts it in place (renamed, then the
// campaigns directory synced) before Append returns: a campaign directory
// appears with its first journal record or not at all. Close removes a
// new campaign's directory that never took a record, and so does the
// next Create of its id, or SweepCreates, one that a killed create left.
//
// A directory of the id that holds a journal without a generation (a
// create that stopped before its first record, by an agentpen that did
// not make it one step) is refused (ErrEmptyCampaign): agentpen
// reconcile removes it.
func (r *Root) Create(id string) (*Campaign, error) {
	if err := campaign.CheckID("campaign_id", id); err != nil {
		return nil, err
	}
	if r.dir == nil {
		return nil, rootError(r.path, errors.New("opened for reading only"))
	}
	key := campaign.Key(id)
	cd, err := r.dir.MkdirAll(campaignsDir, 0o700)
	if err != nil {
		return nil, rootError(r.path, err)
	}
	cd.Close()
	if err := r.checkCampaigns(); err != nil {
		return nil, err
	}
	c, err := r.openKey(key)
	switch {
	case err == nil:
		c.ID = id
		st, rerr := c.Read()
		if rerr == nil && st.Status == campaign.StatusEmpty {
			c.Close()
			return nil, fmt.Errorf("campaign %q: %w: its journal %s holds no generation (a create that stopped before its first record); agentpen reconcile removes it", id, ErrEmptyCampaign, c.JournalPath())
		}
		return c, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	// New: staged. What a killed create of this id left goes first (the
	// caller holds the id's lock: no create of it is running).
	if err := r.removeStaged(key); err != nil {
		return nil, err
	}
	staged := stagingPrefix + key + "." + nonce()
	if err := r.dir.Mkdir(campaignsDir+"/"+staged, 0o700); err != nil {
		return nil, rootError(r.path, err)
	}
	d, err := r.dir.OpenDirAs(campaignsDir+"/"+staged, r.dir.Join(campaignsDir+"/"+key))
	if err == nil {
		var fi fs.FileInfo
		if fi, err = d.Stat(); err == nil {
			err = campaign.CheckPrivate("campaign directory", d.Path(), fi, true)
		}
		if err != nil {
			d.Close()
		}
	}
	if err != nil {
		r.dir.RemoveAll(campaignsDir + "/" + staged)
		return nil, err
	}
	return &Campaign{ID: id, Key: key, Path: d.Path(), dir: d, root: r, staged: staged}, nil
}

// ErrEmptyCampaign is returned (wrapped) by Create for an id whose
// directory holds a journal without a generation (campaign.StatusEmpty).
var ErrEmptyCampaign = errors.New("an empty campaign directory is in the way")

// stagingPrefix starts the name of a new campaign's directory until its
// first journal record puts it in place (no campaign key starts with a
// dot).
const stagingPrefix = ".create."

func nonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// stagedKey is the campaign key of a staging directory's name ("" and
// false for any other name).
func stagedKey(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, stagingPrefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", false
	}
	return rest[:i], true
}

// Staged is a new campaign's directory that never took a journal record:
// a create in flight, or one killed before its first record.
type Staged struct {
	// Key is the campaign key it would have taken; Name its name under
	// the campaigns directory.
	Key, Name string
}

// Staged lists the staging directories of new campaigns (see Create).
func (r *Root) Staged() ([]Staged, error) {
	if r.dir == nil {
		return nil, nil
	}
	entries, err := r.dir.ReadDir(campaignsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, rootError(r.path, err)
	}
	var out []Staged
	for _, e := range entries {
		if key, ok := stagedKey(e.Name()); ok && e.IsDir() {
			out = append(out, Staged{Key: key, Name: e.Name()})
		}
	}
	return out, nil
}

// RemoveStaged removes a staging directory (Staged) and what is in it.
// The caller holds the lock of its key: no create of it runs.
func (r *Root) RemoveStaged(s Staged) error {
	if key, ok := stagedKey(s.Name); !ok || key != s.Key || strings.Contains(s.Name, "/") {
		return fmt.Errorf("%s: not a staging directory of %s", s.Name, s.Key)
	}
	if err := r.dir.RemoveAll(campaignsDir + "/" + s.Name); err != nil {
		return err
	}
	return r.dir.SyncParent(campaignsDir + "/" + s.Name)
}

// removeStaged removes every staging directory of key.
func (r *Root) removeStaged(key string) error {
	staged, err := r.Staged()
	if err != nil {
		return err
	}
	for _, s := range staged {
		if s.Key == key {
			if err := r.RemoveStaged(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// RemoveEmpty removes the directory of the campaign listed under key
// (Listing.Key) when its journal holds no generation
// (campaign.StatusEmpty), and nothing else. The caller holds the
// campaign's lock and has made sure that nothing on the daemon carries
// its id.
func (r *Root) RemoveEmpty(key string) error {
	c, err := r.openKey(key)
	if err != nil {
		return err
	}
	st, err := c.Read()
	c.Close()
	if err != nil {
		return err
	}
	if st.Status != campaign.StatusEmpty {
		return fmt.Errorf("campaign directory %s: its journal holds a generation (it is %s): not removed", r.dir.Join(campaignsDir+"/"+key), st.Status)
	}
	name := campaignsDir + "/" + key
	if err := r.dir.RemoveAll(name); err != nil {
		return err
	}
	return r.dir.SyncParent(name)
}

// openKey opens a campaign directory by its key and checks it holds a
// journal (fs.ErrNotExist otherwise).
func (r *Root) openKey(key string) (*Campaign, error) {
	c, err := r.openDir(key)
	if err != nil {
		return nil, err
	}
	if _, err := c.dir.Lstat(campaign.JournalFile); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// openDir opens and checks a campaign directory.
func (r *Root) openDir(key string) (*Campaign, error) {
	name := campaignsDir + "/" + key
	fi, err := r.dir.Lstat(name)
	if err != nil {
		return nil, err
	}
	path := r.dir.Join(name)
	if err := campaign.CheckPrivate("campaign directory", path, fi, true); err != nil {
		return nil, err
	}
	d, err := r.dir.OpenDir(name)
	if err != nil {
		return nil, err
	}
	fi, err = d.Stat()
	if err == nil {
		err = campaign.CheckPrivate("campaign directory", path, fi, true)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return &Campaign{Key: key, Path: path, dir: d, root: r}, nil
}

func noCampaign(id, dir string) error {
	return fmt.Errorf("%w %q: nothing in %s (agentpen ls lists this state root's campaigns; --state-root names another)", ErrNoCampaign, id, dir)
}

// Listing is one campaign of a state root as List read it.
type Listing struct {
	// ID is the campaign's id (from its latest spec, or its first one
	// when its journal holds no generation; the directory's key when no
	// spec can be read). Key is its directory's name.
	ID, Key string
	Path    string
	// State is what its journal says; with Err, what could be read, for
	// listing only.
	State State
	// Err says why the campaign's state cannot be used: a corrupt journal
	// (campaign.ErrJournalCorrupt), a directory or journal another user
	// owns or can write (campaign.ErrUntrusted), or one that cannot be
	// read. Its status is then campaign.StatusUnusable.
	Err error
}

// List reads every campaign of the root, sorted by id. A campaign whose
// state cannot be used is listed with Err, never hiding the others; the
// error is for a root that cannot be used (ErrStateRoot).
func (r *Root) List() ([]Listing, error) {
	if r.dir == nil {
		return nil, nil
	}
	entries, err := r.dir.ReadDir(campaignsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, rootError(r.path, err)
	}
	var out []Listing
	for _, e := range entries {
		if !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if _, staged := stagedKey(e.Name()); staged {
			continue // a new campaign's, until its first record (Create)
		}
		l := Listing{ID: e.Name(), Key: e.Name(), Path: r.dir.Join(campaignsDir + "/" + e.Name())}
		c, err := r.openKey(e.Name())
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // a directory without a journal is not a campaign
		case err != nil:
			// A symbolic link where a campaign's directory belongs is
			// listed (untrusted), never skipped: it may hide a campaign.
			l.Err = err
			l.State.Lifecycle.Status = campaign.StatusUnusable
		default:
			l.State, l.Err = c.Read()
			// The spec names the campaign (its directory is its key);
			// never read from beside a journal another user can write.
			if !errors.Is(l.Err, campaign.ErrUntrusted) {
				if id := c.specID(max(1, l.State.Lifecycle.Latest().N)); id != "" {
					l.ID = id
				}
			}
			c.Close()
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(x, y Listing) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// specID is the campaign id its spec of generation gen names ("" when it
// cannot be read).
func (c *Campaign) specID(gen int) string {
	b, err := c.dir.ReadFile(SpecFile(gen), campaign.MaxSpecBytes)
	if err != nil {
		return ""
	}
	var spec struct {
		CampaignID string `json:"campaign_id"`
	}
	if json.Unmarshal(b, &spec) != nil {
		return ""
	}
	return spec.CampaignID
}
