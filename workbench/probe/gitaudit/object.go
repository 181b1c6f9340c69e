package gitaudit

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
)

// ID is a SHA-1 object name, the only object format this reader knows
// (a repository of another format is refused: ErrUnsupported).
type ID [20]byte

// zeroID is the all-zero name reflogs use for "no value".
var zeroID ID

// String is the name in hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID reads a 40-hex name (lower or upper case).
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("object name %q: want 40 hex digits", clip(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("object name %q: %w", clip(s), err)
	}
	return id, nil
}

// Type is an object's type, as a pack entry's header numbers it.
type Type uint8

// The object types (and the two delta kinds of a pack).
const (
	TypeCommit   Type = 1
	TypeTree     Type = 2
	TypeBlob     Type = 3
	TypeTag      Type = 4
	typeOfsDelta Type = 6
	typeRefDelta Type = 7
)

// String is the type's name as git spells it.
func (t Type) String() string {
	switch t {
	case TypeCommit:
		return "commit"
	case TypeTree:
		return "tree"
	case TypeBlob:
		return "blob"
	case TypeTag:
		return "tag"
	}
	return fmt.Sprintf("type%d", t)
}

func parseType(s []byte) (Type, bool) {
	switch string(s) {
	case "commit":
		return TypeCommit, true
	case "tree":
		return TypeTree, true
	case "blob":
		return TypeBlob, true
	case "tag":
		return TypeTag, true
	}
	return 0, false
}

// ErrCorrupt is an object, index, pack or ref file this reader cannot
// read as git writes it.
var ErrCorrupt = errors.New("corrupt")

// ErrUnsupported is a repository this reader cannot audit (another object
// format, a ref storage other than files, grafts, a submodule's
// repository): the audit says so and
// fails closed rather than guess.
var ErrUnsupported = errors.New("unsupported")

// ErrMissing is an object the repository does not hold.
var ErrMissing = errors.New("object missing")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Commit is what the audit needs of a commit: its tree and parents.
type Commit struct {
	Tree    ID
	Parents []ID
}

// ParseCommit reads a commit object's header: its tree line and its parent
// lines, which git writes first and in that order.
func ParseCommit(data []byte) (Commit, error) {
	var c Commit
	line, rest, ok := bytes.Cut(data, []byte{'\n'})
	v, isTree := bytes.CutPrefix(line, []byte("tree "))
	if !ok || !isTree {
		return c, corrupt("commit: no tree line first")
	}
	var err error
	if c.Tree, err = ParseID(string(v)); err != nil {
		return c, corrupt("commit tree: %v", err)
	}
	for {
		line, next, ok := bytes.Cut(rest, []byte{'\n'})
		v, isParent := bytes.CutPrefix(line, []byte("parent "))
		if !ok || !isParent {
			return c, nil
		}
		p, err := ParseID(string(v))
		if err != nil {
			return c, corrupt("commit parent: %v", err)
		}
		c.Parents = append(c.Parents, p)
		rest = next
	}
}

// Tag is what the audit needs of an annotated tag: the object it names.
type Tag struct {
	Object ID
	Type   Type
}

// ParseTag reads a tag object's object and type lines.
func ParseTag(data []byte) (Tag, error) {
	var t Tag
	line, rest, ok := bytes.Cut(data, []byte{'\n'})
	v, isObject := bytes.CutPrefix(line, []byte("object "))
	if !ok || !isObject {
		return t, corrupt("tag: no object line first")
	}
	var err error
	if t.Object, err = ParseID(string(v)); err != nil {
		return t, corrupt("tag object: %v", err)
	}
	line, _, _ = bytes.Cut(rest, []byte{'\n'})
	v, isType := bytes.CutPrefix(line, []byte("type "))
	typ, known := parseType(v)
	if !isType || !known {
		return t, corrupt("tag: no type line after its object")
	}
	t.Type = typ
	return t, nil
}

// TreeEntry is one entry of a tree: its mode's kind, its name and the
// object it names.
type TreeEntry struct {
	// Tree: a directory (mode 40000); Gitlink: a submodule's commit (mode
	// 160000), an object of another repository; otherwise a blob.
	Tree, Gitlink bool
	Name          []byte
	ID            ID
}

// EachTreeEntry calls fn for every entry of a tree object ("MODE NAME\0"
// and 20 bytes of name each), in order, and stops at fn's error.
func EachTreeEntry(data []byte, fn func(TreeEntry) error) error {
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		if sp <= 0 || sp > 7 {
			return corrupt("tree entry: no mode")
		}
		mode := data[:sp]
		nul := bytes.IndexByte(data[sp+1:], 0)
		if nul <= 0 {
			return corrupt("tree entry: no name")
		}
		name := data[sp+1 : sp+1+nul]
		data = data[sp+1+nul+1:]
		if len(data) < len(ID{}) {
			return corrupt("tree entry %q: short object name", clip(string(name)))
		}
		e := TreeEntry{Name: name, Tree: string(mode) == "40000", Gitlink: string(mode) == "160000"}
		copy(e.ID[:], data)
		data = data[len(ID{}):]
		for _, c := range mode {
			if c < '0' || c > '7' {
				return corrupt("tree entry %q: mode %q", clip(string(name)), clip(string(mode)))
			}
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
