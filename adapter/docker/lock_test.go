package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/store"
)

// TestLocksFollowTheDaemonNotTheSpelling: two adapters on one real daemon,
// one through DOCKER_HOST as the daemon made it and one through a symbolic
// link to its socket in another directory (--allow-custom-socket), share
// the campaign lock and the uid-block claims; they used to live beside
// each spelling's directory, so the second bring-up took the same uid
// block.
func TestLocksFollowTheDaemonNotTheSpelling(t *testing.T) {
	raw := testenv.RequireDocker(t)
	direct, err := ResolveHost(raw, os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "x", "docker.sock")
	os.MkdirAll(filepath.Dir(link), 0o700)
	if err := os.Symlink(direct.SocketPath, link); err != nil {
		t.Fatal(err)
	}
	linked, err := ResolveHost("unix://"+link, true)
	if err != nil {
		t.Fatal(err)
	}
	adapterOn := func(h Host) *adapter.Adapter {
		d, err := Connect(t.Context(), h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return &adapter.Adapter{Driver: d}
	}
	a, b := adapterOn(direct), adapterOn(linked)
	la, err := a.Locks()
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Locks()
	if err != nil {
		t.Fatal(err)
	}
	if la.Path() != lb.Path() || dk(a).runBase() != dk(b).runBase() {
		t.Fatalf("lock directories %s and %s, run bases %s and %s: want one of each", la.Path(), lb.Path(), dk(a).runBase(), dk(b).runBase())
	}
	// Root's locks live where only root can write, never in the daemon
	// user's runtime directory beside its socket.
	if !strings.HasPrefix(la.Path(), "/run/agentpen/locks/daemon-") {
		t.Fatalf("lock directory %s is not in root's /run/agentpen", la.Path())
	}
	key := fmt.Sprintf("locktest-%d.lock", time.Now().UnixNano())
	l, err := la.Take(t.Context(), key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lb.Take(t.Context(), key, 300*time.Millisecond); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("the linked spelling took the campaign lock the direct one holds: %v", err)
	}
	l.Unlock()
	os.Remove(filepath.Join(la.Path(), key))
	// The uid-block claims too: a block the direct spelling holds is
	// claimed for the linked one.
	block := strconv.Itoa(campaign.UIDBlockFirst + (campaign.UIDBlocks-1)*campaign.UIDBlockSize)
	ca, ok, err := la.TryClaim("uid-blocks", block)
	if err != nil || !ok {
		t.Fatalf("claim uid block %s: %v %v", block, ok, err)
	}
	defer ca.Unlock()
	if cb, ok, err := lb.TryClaim("uid-blocks", block); err != nil || ok {
		if ok {
			cb.Unlock()
		}
		t.Fatalf("both spellings claimed uid block %s (%v)", block, err)
	}
}

// TestSocketWithHardLinksRefused: a socket with another hard link is
// another real path to the same daemon, so it is refused, naming the fix.
func TestSocketWithHardLinksRefused(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "rootless", "docker.sock")
	os.MkdirAll(filepath.Dir(sock), 0o700)
	os.WriteFile(sock, nil, 0o600)
	if err := os.Link(sock, filepath.Join(dir, "other.sock")); err != nil {
		t.Fatal(err)
	}
	h, err := ResolveHost("unix://"+sock, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Connect(t.Context(), h)
	var he *HostError
	if !errors.As(err, &he) || !errors.Is(err, ErrHostLinked) || !strings.Contains(err.Error(), sock+" has 2 hard links") {
		t.Fatalf("Connect over a socket with two links: %v", err)
	}
}
