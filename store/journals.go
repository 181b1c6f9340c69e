package store

import (
	"os"
	"sync"

	"github.com/agentpen/agentpen/campaign"
)

// A root keeps what it last read of each campaign's journal (issue 41):
// a claim, and the service's reads around it, read the journal several
// times, and a campaign with a pool has a long one. A read reuses it
// (campaign.ReadJournalAfter): it reads the lines appended since, when
// the file is the one read before and its last line read is still
// there, and all of it otherwise (another file of the name: a campaign
// removed and made again; a write in place). So nothing is served from
// memory that the file does not say now: another process's records (it
// appends under the campaign's lock, as this one does) are read at the
// next read, as before.

// maxJournals bounds the journals a root keeps; beyond it one is dropped.
const maxJournals = 1024

// journals is a root's last read of each campaign's journal, by key.
type journals struct {
	mu sync.Mutex
	m  map[string]*journalEntry
}

// journalEntry is one campaign's.
type journalEntry struct {
	read campaign.JournalContents
	// synced is the journal file whose directory entry was synced by
	// this root's OpenJournal (nil: none).
	synced os.FileInfo
}

// get returns key's last read (the zero contents for none) and the file
// whose directory entry was synced.
func (js *journals) get(key string) (campaign.JournalContents, os.FileInfo) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if e := js.m[key]; e != nil {
		return e.read, e.synced
	}
	return campaign.JournalContents{}, nil
}

// put keeps c, a read of key's journal without error, unless what is
// kept is a longer read of the same file (a read that raced another).
// The file synced is forgotten unless c was read on from a read of it.
func (js *journals) put(key string, c campaign.JournalContents) {
	js.mu.Lock()
	defer js.mu.Unlock()
	e := js.entryLocked(key)
	if old := e.read.FileInfo(); old != nil && os.SameFile(old, c.FileInfo()) && old.Size() > c.FileInfo().Size() {
		return
	}
	if !c.ReadOn() {
		// Read from its start: it may be another file than the one
		// synced, even under the same inode number (one reused).
		e.synced = nil
	}
	e.read = c
}

// markSynced records that the directory entry of the journal file fi
// was synced.
func (js *journals) markSynced(key string, fi os.FileInfo) {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.entryLocked(key).synced = fi
}

func (js *journals) entryLocked(key string) *journalEntry {
	if js.m == nil {
		js.m = map[string]*journalEntry{}
	}
	e := js.m[key]
	if e == nil {
		if len(js.m) >= maxJournals {
			for k := range js.m {
				delete(js.m, k)
				break
			}
		}
		e = &journalEntry{}
		js.m[key] = e
	}
	return e
}
