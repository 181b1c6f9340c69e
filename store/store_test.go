package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// newCampaign makes a state root with campaign id's directory and a
// journal of records.
func newCampaign(t *testing.T, id string, recs ...campaign.Record) (*Root, *Campaign) {
	t.Helper()
	r, err := CreateRoot(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	c, err := r.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, rec := range recs {
		if err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	return r, c
}

var begun = []campaign.Record{
	{Op: campaign.OpBegin, Gen: 1, Instance: "i1"},
	{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindContainer, Name: "w", ID: "w1"},
	{Op: campaign.OpReady, Gen: 1},
}

// TestOpen: a campaign is opened by id once (validated, checked, with a
// journal), and a missing one is ErrNoCampaign naming the state root.
func TestOpen(t *testing.T) {
	r, _ := newCampaign(t, "camp-1", begun...)
	c, err := r.Open("camp-1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Read()
	if err != nil || st.Status != campaign.StatusReady || st.Latest().N != 1 {
		t.Fatalf("read: %+v %v", st, err)
	}
	if _, err := r.Open("camp-2"); !errors.Is(err, ErrNoCampaign) || !strings.Contains(err.Error(), r.Path()) {
		t.Fatalf("open of a missing campaign: %v", err)
	}
	if _, err := r.Open("bad id!"); !errors.Is(err, campaign.ErrInvalid) {
		t.Fatalf("open of a bad id: %v", err)
	}
	missing, err := OpenRoot(filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatalf("a missing root read: %v", err)
	}
	if l, err := missing.List(); err != nil || len(l) != 0 {
		t.Fatalf("a missing root lists %v %v", l, err)
	}
	if _, err := missing.Open("camp-1"); !errors.Is(err, ErrNoCampaign) {
		t.Fatalf("open in a missing root: %v", err)
	}
}

// TestTrust: a state root, campaigns directory or campaign directory
// another user owns or can write is refused before anything in it is
// read; a symbolic link where a campaign's directory belongs is listed
// as unusable, never followed or skipped.
func TestTrust(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spoil func(root, dir string) error
		open  bool // Open refuses (else OpenRoot refuses)
		want  string
	}{
		{"root_writable", func(root, dir string) error { return os.Chmod(root, 0o777) }, false, "has mode 0777: other users can write it"},
		{"campaigns_writable", func(root, dir string) error { return os.Chmod(filepath.Dir(dir), 0o757) }, false, "has mode 0757"},
		{"dir_writable", func(root, dir string) error { return os.Chmod(dir, 0o777) }, true, "campaign directory " + "DIR has mode 0777"},
		{"dir_foreign", func(root, dir string) error { return os.Lchown(dir, 65534, 65534) }, true, "campaign directory DIR is owned by uid 65534"},
		{"root_foreign", func(root, dir string) error { return os.Lchown(root, 65534, 65534) }, false, "is owned by uid 65534"},
		{"dir_symlink", func(root, dir string) error {
			if err := os.Rename(dir, dir+".real"); err != nil {
				return err
			}
			return os.Symlink(dir+".real", dir)
		}, true, "symbolic link"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if strings.HasSuffix(tt.name, "_foreign") {
				testenv.RequireRoot(t)
			}
			r, c := newCampaign(t, "camp-1", begun...)
			c.Close()
			root, dir := r.Path(), c.Path
			r.Close()
			if err := tt.spoil(root, dir); err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tt.want, "DIR", dir)
			r2, err := OpenRoot(root)
			if !tt.open {
				if err == nil || !errors.Is(err, ErrStateRoot) || !strings.Contains(err.Error(), want) {
					t.Fatalf("OpenRoot: %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Close()
			if _, err := r2.Open("camp-1"); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open: %v, want %q", err, want)
			}
			l, err := r2.List()
			if err != nil || len(l) == 0 || l[0].Path != dir || l[0].Err == nil || l[0].State.Status != campaign.StatusUnusable {
				t.Fatalf("List: %+v %v, want the campaign listed unusable", l, err)
			}
		})
	}
}

// TestReportsAppendOnly: a report is a new file per generation and
// number, never over another; the journal's record names the one a
// reader gets, and a report changed after it was journalled is refused.
func TestReportsAppendOnly(t *testing.T) {
	_, c := newCampaign(t, "camp-1", begun...)
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var names []string
	for i, ok := range []bool{true, false} {
		f, err := c.WriteReport(KindAttestation, 1, []byte(`{"schema":"agentpen.attestation.v1","ok":`+strconv.FormatBool(ok)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := "attestation-1-" + strconv.Itoa(i+1) + ".json"; f.Name != want {
			t.Fatalf("report %d named %s, want %s", i, f.Name, want)
		}
		names = append(names, f.Name)
		status := campaign.AttestOK
		if !ok {
			status = campaign.AttestFailed
		}
		if err := j.Append(campaign.Record{Op: campaign.OpAttested, Gen: 1, Status: status, Report: f.Name, Digest: f.Digest}); err != nil {
			t.Fatal(err)
		}
	}
	// A report written but never journalled (its writer died) is kept,
	// skipped by numbering, and never read as the verdict.
	if err := c.dir.WriteNew("attestation-1-3.json", []byte(`{"ok":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Attestation(st)
	if err != nil || rep == nil || rep.OK || st.Status != campaign.StatusAttestationFailed {
		t.Fatalf("the latest attestation: %+v %v (status %s), want the second (failed)", rep, err, st.Status)
	}
	if f, err := c.WriteReport(KindAttestation, 1, []byte(`{}`)); err != nil || f.Name != "attestation-1-4.json" {
		t.Fatalf("the next report: %+v %v", f, err)
	}
	first, _ := os.ReadFile(c.ReportPath(names[0]))
	if !strings.Contains(string(first), `"ok":true`) {
		t.Fatalf("the first report changed: %s", first)
	}
	// One byte changed in the journalled report: refused, named.
	os.WriteFile(c.ReportPath(names[1]), []byte(`{"schema":"agentpen.attestation.v1","ok":true}`), 0o600)
	if _, err := c.Attestation(st); !errors.Is(err, ErrReportTampered) || !strings.Contains(err.Error(), names[1]) {
		t.Fatalf("a tampered report: %v", err)
	}
}

// TestSpecOnce: a generation's spec and daemon are written once.
func TestSpecOnce(t *testing.T) {
	_, c := newCampaign(t, "camp-1", begun...)
	spec := campaign.CampaignSpec{CampaignID: "camp-1"}
	if err := c.WriteSpec(1, spec); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteSpec(1, spec); err == nil {
		t.Fatal("a generation's spec written twice")
	}
	got, err := c.Spec(1)
	if err != nil || got.CampaignID != "camp-1" {
		t.Fatalf("spec: %+v %v", got, err)
	}
	if _, ok, err := c.Daemon(1); ok || err != nil {
		t.Fatalf("daemon of a generation without one: %v %v", ok, err)
	}
}

// TestLocks: a lock is exclusive and names its holder; a link planted as
// a lock's name is refused and its target left as it was; a lock
// directory another user can write is refused.
func TestLocks(t *testing.T) {
	base := filepath.Join(t.TempDir(), "run")
	l, err := OpenLocks(base, "daemon-1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held, err := l.Campaign(t.Context(), "camp-1-abc", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Another open of the file description: flock is per description.
	l2, err := OpenLocks(base, "daemon-1")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	_, err = l2.Campaign(t.Context(), "camp-1-abc", 100*time.Millisecond)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a held lock: %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l2.Campaign(ctx, "camp-1-abc", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	held.Unlock()
	again, err := l2.Campaign(t.Context(), "camp-1-abc", time.Second)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again.Unlock()

	victim := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(victim, []byte("root:secret\n"), 0o600)
	os.Symlink(victim, filepath.Join(l.Path(), "planted.lock"))
	if _, err := l.Campaign(t.Context(), "planted", time.Second); err == nil || !strings.Contains(err.Error(), "planted.lock") {
		t.Fatalf("a planted link: %v", err)
	}
	if _, ok, err := l.TryClaim("uid-blocks", "../planted.lock"); ok || err == nil {
		t.Fatalf("a claim through a link: %v %v", ok, err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:secret\n" {
		t.Fatalf("the link's target now holds %q", b)
	}
	os.Chmod(filepath.Join(base, "locks"), 0o777)
	if _, err := OpenLocks(base, "daemon-1"); !errors.Is(err, campaign.ErrUntrusted) {
		t.Fatalf("a lock directory others can write: %v", err)
	}
}

// TestLocksTakeInTurn: in one process a lock's waiters take it in the
// order they came. A goroutine that releases it and takes it again at
// once (back-to-back pool claims) comes after one that was waiting (the
// pool's refill); with the flock polled alone, the waiter, asleep
// between its polls, lost every round.
func TestLocksTakeInTurn(t *testing.T) {
	l, err := OpenLocks(filepath.Join(t.TempDir(), "run"), "daemon-1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const name = "camp-1-abc.lock"
	for round := range 20 {
		held, err := l.Take(t.Context(), name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		var mu sync.Mutex
		note := func(who string) { mu.Lock(); order = append(order, who); mu.Unlock() }
		done := make(chan error, 1)
		go func() {
			w, err := l.Take(t.Context(), name, time.Minute)
			if err == nil {
				note("waiter")
				w.Unlock()
			}
			done <- err
		}()
		testenv.WaitFor(t, "the waiter in the queue", func() bool { return l.queueOf(name).waiting.Load() == 1 })
		held.Unlock()
		again, err := l.Take(t.Context(), name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		note("holder again")
		again.Unlock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if order[0] != "waiter" {
			t.Fatalf("round %d: %v took the lock first, want the waiter", round, order)
		}
	}
	// A free lock is taken with no wait at all (agentpen reconcile's
	// expiry asks so), every time.
	for range 200 {
		l, err := l.Take(t.Context(), name, 0)
		if err != nil {
			t.Fatalf("a free lock with no wait: %v", err)
		}
		l.Unlock()
	}
}

// TestLockServe: one service per state root, and a link planted where its
// lock belongs is refused without touching what it points at.
func TestLockServe(t *testing.T) {
	r, err := CreateRoot(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lk, err := r.LockServe()
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := OpenRoot(r.Path())
	defer r2.Close()
	if _, err := r2.LockServe(); !errors.Is(err, ErrServed) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second serve: %v", err)
	}
	lk.Unlock()

	r3, _ := CreateRoot(filepath.Join(t.TempDir(), "state"))
	defer r3.Close()
	victim := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(victim, []byte("root:secret\n"), 0o600)
	os.Mkdir(filepath.Join(r3.Path(), "api"), 0o700)
	os.Symlink(victim, filepath.Join(r3.Path(), "api", "serve.lock"))
	if _, err := r3.LockServe(); err == nil {
		t.Fatal("serve locked through a planted link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:secret\n" {
		t.Fatalf("the link's target now holds %q", b)
	}
}

// TestSecret: a secret is made once (0600), read back the same, and one
// that is not this user's alone is refused.
func TestSecret(t *testing.T) {
	r, err := CreateRoot(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k1, err := r.Secret("server.key", 32)
	if err != nil || len(k1) != 32 {
		t.Fatalf("%x %v", k1, err)
	}
	k2, err := r.Secret("server.key", 32)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("read back %x %v, want %x", k2, err, k1)
	}
	fi, _ := os.Stat(r.KeyPath("server.key"))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	os.Chmod(r.KeyPath("server.key"), 0o644)
	if _, err := r.Secret("server.key", 32); !errors.Is(err, ErrSecret) {
		t.Fatalf("a secret others can read: %v", err)
	}
	if _, err := r.Secret("server.key", 16); !errors.Is(err, ErrSecret) {
		t.Fatalf("a secret of another size: %v", err)
	}
}

// TestSecretConcurrent: services starting at once on a fresh state root
// all get the same secret (one of them made it); none fails with "file
// exists" or reads one half written, and no temporary file is left.
func TestSecretConcurrent(t *testing.T) {
	for round := range 20 {
		r, err := CreateRoot(filepath.Join(t.TempDir(), "state"))
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		keys := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				keys[i], errs[i] = r.Secret("server.key", 32)
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil || string(keys[i]) != string(keys[0]) {
				t.Fatalf("round %d: secret %d: %x %v, want %x", round, i, keys[i], errs[i], keys[0])
			}
		}
		if left, _ := filepath.Glob(filepath.Join(r.Path(), "keys", ".*")); len(left) > 0 {
			t.Fatalf("round %d: temporary files left: %v", round, left)
		}
		r.Close()
	}
}
