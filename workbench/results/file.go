package results

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// FileName is the results file's name in a workspace's run directory.
const FileName = "results.jsonl"

// MaxFile bounds what one Read takes in: a reader catches up over several
// reads, never holding more than this.
const MaxFile = 1 << 20

// Append appends r to the results file at path as one line, in one
// write: the file is opened for each record (created mode 0600 when
// missing), never through a symbolic link, and refused unless it is a
// regular file, so a file replaced between two records is never
// followed.
func Append(path string, r Record) error {
	line, err := r.Marshal()
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := regular(f); err != nil {
		return err
	}
	_, err = f.Write(line)
	return err
}

func regular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: a %s, not a regular file", f.Name(), fi.Mode().Type())
	}
	return nil
}

// Refusal is a line Read skipped, and why.
type Refusal struct {
	// Offset is where the line starts in the file.
	Offset int64
	// Reason says what is wrong with it.
	Reason string
}

// ErrShrunk is returned by Read when the file is shorter than the offset
// it was asked to read from: it was truncated or replaced.
var ErrShrunk = errors.New("the results file is shorter than what was read of it before")

// Read reads the whole lines of f from offset on, at most MaxFile bytes
// of them, and returns the records they hold, the offset to read from
// next (past the last whole line; a partial last line is left for the
// next read), and the lines it refused. f must be a regular file,
// opened by the caller without following links.
func Read(f *os.File, offset int64) (recs []Record, next int64, refused []Refusal, err error) {
	buf, err := ReadFrom(f, offset)
	if err != nil {
		return nil, offset, nil, err
	}
	recs, next, refused = Lines(buf, offset)
	return recs, next, refused, nil
}

// ReadFrom returns the bytes of f from offset on, at most MaxFile of them:
// ErrShrunk when f is shorter than offset, an error when it is not a
// regular file. f must be opened by the caller without following links.
func ReadFrom(f *os.File, offset int64) ([]byte, error) {
	if err := regular(f); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < offset {
		return nil, ErrShrunk
	}
	buf := make([]byte, min(fi.Size()-offset, MaxFile))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// Lines parses the whole lines of buf, the bytes of a results file from
// offset on (at most MaxFile of them), strictly: it returns the records
// they hold, the offset to read from next (past the last whole line; a
// partial last line is left for the next read) and the lines it refused.
func Lines(buf []byte, offset int64) (recs []Record, next int64, refused []Refusal) {
	next = offset
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			if len(buf) >= MaxLine {
				// No newline where one must be: refuse what is here and
				// skip it, so one long line cannot stall the reader.
				refused = append(refused, Refusal{next, fmt.Sprintf("a line of more than %d bytes", MaxLine-1)})
				next += int64(len(buf))
			}
			break
		}
		line := buf[:i]
		if r, err := Parse(line); err != nil {
			refused = append(refused, Refusal{next, err.Error()})
		} else {
			recs = append(recs, r)
		}
		next += int64(i + 1)
		buf = buf[i+1:]
	}
	return recs, next, refused
}
