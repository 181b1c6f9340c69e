package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// journalOf is the path of the campaign's journal under the state root.
func journalOf(stateRoot, id string) string {
	return filepath.Join(stateRoot, "campaigns", campaign.Key(id), campaign.JournalFile)
}

// loadJournal reads the journal at path (never following a link).
func loadJournal(path string) (campaign.JournalContents, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return campaign.JournalContents{}, err
	}
	defer f.Close()
	return campaign.ReadJournal(f, path)
}

// records reads the journal at path, failing the test when it cannot.
func records(t *testing.T, path string) []campaign.Record {
	t.Helper()
	c, err := loadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	return c.Records
}

// appendRecords appends records to the campaign's journal as agentpen
// does (chained), failing the test when it cannot.
func appendRecords(t *testing.T, stateRoot, id string, recs ...campaign.Record) {
	t.Helper()
	root, err := store.OpenRoot(stateRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	c, err := root.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
}
