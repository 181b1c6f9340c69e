package testenv

import (
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Readable is what a scan for a secret must read of a file's content b:
// b itself and, when b is a DSSE envelope (a signed statement), its
// base64 payload decoded, which a search of the raw bytes would miss.
func Readable(b []byte) []byte {
	var env struct {
		Payload string `json:"payload"`
	}
	if json.Unmarshal(b, &env) != nil || env.Payload == "" {
		return b
	}
	p, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return b
	}
	return append(append(append([]byte{}, b...), '\n'), p...)
}

// ReadTree reads every regular file under dir, each as Readable gives
// it, by path: what a test that scans a state root for a secret reads.
func ReadTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(Readable(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
