package campaign

import (
	"os"
	"path/filepath"
	"syscall"
)

// openJournalDir continues (or starts) the journal in dir, made 0700 when
// missing, as the store opens it.
func openJournalDir(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, JournalFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	return OpenJournal(f, path)
}

// loadJournalPath reads the journal at path.
func loadJournalPath(path string) (JournalContents, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return JournalContents{}, err
	}
	defer f.Close()
	return ReadJournal(f, path)
}

// readJournalPath is loadJournalPath's records.
func readJournalPath(path string) ([]Record, error) {
	c, err := loadJournalPath(path)
	return c.Records, err
}
