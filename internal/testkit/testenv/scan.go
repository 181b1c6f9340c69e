package testenv

import (
	"encoding/base64"
	"encoding/json"
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
