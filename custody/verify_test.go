package custody_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/custody"
)

const (
	att1 = "attestation-1-1.json"
	att2 = "attestation-1-2.json"
	cln1 = "cleanup-1-1.json"
)

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// TestVerifyCampaign: a campaign attested twice and removed verifies
// whole: the chain, every report's envelope, signature, statement,
// predicate, subjects and record, the cleanup's attestation, the tail.
func TestVerifyCampaign(t *testing.T) {
	dir, key := signedCampaign(t, lifecycle{})
	res := verifyDir(t, dir, pubOf(key), custody.Options{})
	if !res.OK || len(res.Failed) != 0 {
		t.Fatalf("not verified: %v\n%s", res.Failed, details(res))
	}
	if want := []string{att1, att2, cln1}; !slices.Equal(res.Reports, want) {
		t.Fatalf("reports %v, want %v", res.Reports, want)
	}
	for _, id := range []string{"journal.chain", "journal.tail", att1 + ".signature", att1 + ".subject.spec-1.json", att1 + ".subject.daemon-1.json",
		att1 + ".subject.journal.jsonl", att1 + ".subject.agentpen/workbench:dev", att2 + ".predicate", cln1 + ".follows", cln1 + ".subject." + att2} {
		if !hasCheck(res, id) {
			t.Errorf("no check %s among\n%s", id, details(res))
		}
	}
	if res.KeyID != custody.KeyID(pubOf(key)) || !strings.HasPrefix(res.KeyID, "SHA256:") {
		t.Errorf("key id %q", res.KeyID)
	}
}

// TestVerifyRollback: a bring-up rolled back before its attestation
// verifies: its cleanup names no attestation, and the rollback's record
// after the cleanup is expected.
func TestVerifyRollback(t *testing.T) {
	dir, key := signedCampaign(t, lifecycle{Rollback: true})
	res := verifyDir(t, dir, pubOf(key), custody.Options{})
	if !res.OK {
		t.Fatalf("not verified: %v\n%s", res.Failed, details(res))
	}
}

// TestVerifyExpiringTail: warnings of a coming expiry after the last
// signed record (agentpen serve journals them on its own; they change
// nothing of the campaign) leave the campaign verified, as notes do; any
// other record there does not.
func TestVerifyExpiringTail(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{`{"v":2,"seq":1,"time":"2026-01-01T00:00:00Z","op":"expiring","gen":1,"reason":"ttl","deadline":"2026-01-01T00:01:00Z"}`, true},
		{`{"v":2,"seq":1,"time":"2026-01-01T00:00:00Z","op":"lifetime","gen":1,"accepted":"2026-01-01T00:00:00Z","ttl_seconds":60}`, false},
	} {
		dir, key := signedCampaign(t, lifecycle{})
		editLines(t, dir, func(lines [][]byte) [][]byte {
			// Chained to the last line as the journal appends, the lines
			// before untouched.
			var m map[string]any
			if err := json.Unmarshal([]byte(c.line), &m); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(lines[len(lines)-1])
			m["seq"], m["prev"] = len(lines)+1, hex.EncodeToString(sum[:])
			b, _ := json.Marshal(m)
			return append(lines, b)
		})
		res := verifyDir(t, dir, pubOf(key), custody.Options{})
		if res.OK != c.ok || (!c.ok && !slices.Contains(res.Failed, "journal.tail")) {
			t.Errorf("%s: ok %v failed %v, want ok %v", c.line, res.OK, res.Failed, c.ok)
		}
	}
}

// TestVerifyOnly: one report of a campaign verifies alone, and a name the
// journal does not record fails.
func TestVerifyOnly(t *testing.T) {
	dir, key := signedCampaign(t, lifecycle{})
	for _, name := range []string{att1, att2, cln1} {
		res := verifyDir(t, dir, pubOf(key), custody.Options{Only: name})
		if !res.OK || !slices.Equal(res.Reports, []string{name}) || hasCheck(res, "journal.tail") {
			t.Errorf("%s: ok %v reports %v failed %v", name, res.OK, res.Reports, res.Failed)
		}
	}
	res := verifyDir(t, dir, pubOf(key), custody.Options{Only: "attestation-1-9.json"})
	if res.OK || !slices.Contains(res.Failed, "attestation-1-9.json.journal") {
		t.Fatalf("an unjournalled report: ok %v failed %v", res.OK, res.Failed)
	}
}

// TestVerifyOtherKey: reports signed by one key are refused with
// another, each naming the key that signed it.
func TestVerifyOtherKey(t *testing.T) {
	dir, key := signedCampaign(t, lifecycle{})
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	res := verifyDir(t, dir, other, custody.Options{})
	if res.OK {
		t.Fatal("verified with another key")
	}
	for _, name := range []string{att1, att2, cln1} {
		c := check(res, name+".signature")
		if c == nil || c.OK || !strings.Contains(c.Detail, "signed by key "+custody.KeyID(pubOf(key))) {
			t.Errorf("%s.signature: %+v", name, c)
		}
	}
	if !slices.Contains(res.Failed, "journal.tail") {
		t.Errorf("the tail verified with no verified statement: %v", res.Failed)
	}
}

// TestTamper: one change to a report, a subject file, the journal or an
// envelope makes verify fail, naming what was changed.
func TestTamper(t *testing.T) {
	for _, tt := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   []string // failed checks
	}{
		{"predicate_field_in_report", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, att1), func(m map[string]any) { m["ok"] = false })
		}, []string{att1 + ".predicate", att1 + ".subject." + att1, att1 + ".journal"}},
		{"predicate_field_in_envelope", func(t *testing.T, dir string) {
			editPayload(t, filepath.Join(dir, "attestation-1-2.dsse.json"), func(m map[string]any) { m["predicate"].(map[string]any)["ok"] = true })
		}, []string{att2 + ".signature", att2 + ".envelope"}},
		{"subject_digest_in_envelope", func(t *testing.T, dir string) {
			editPayload(t, filepath.Join(dir, "cleanup-1-1.dsse.json"), func(m map[string]any) {
				m["subject"].([]any)[1].(map[string]any)["digest"] = map[string]any{"sha256": strings.Repeat("0", 64)}
			})
		}, []string{cln1 + ".signature", cln1 + ".envelope"}},
		{"subject_file", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "spec-1.json"), func(m map[string]any) { m["campaign_id"] = "other" })
		}, []string{att1 + ".subject.spec-1.json", att2 + ".subject.spec-1.json", cln1 + ".subject.spec-1.json"}},
		{"daemon_file", func(t *testing.T, dir string) {
			editJSON(t, filepath.Join(dir, "daemon-1.json"), func(m map[string]any) { m["id"] = "another" })
		}, []string{att1 + ".subject.daemon-1.json"}},
		{"journal_edit", func(t *testing.T, dir string) {
			editLines(t, dir, func(lines [][]byte) [][]byte {
				lines[2] = bytes.Replace(lines[2], []byte(`"id":"c1"`), []byte(`"id":"c2"`), 1)
				return lines
			})
		}, []string{"journal.chain", att1 + ".subject.journal.jsonl", cln1 + ".subject.journal.jsonl"}},
		{"journal_edit_rechained", func(t *testing.T, dir string) {
			editLines(t, dir, func(lines [][]byte) [][]byte {
				lines[2] = bytes.Replace(lines[2], []byte(`"id":"c1"`), []byte(`"id":"c2"`), 1)
				return rechain(t, lines)
			})
		}, []string{att1 + ".subject.journal.jsonl", att2 + ".subject.journal.jsonl", cln1 + ".subject.journal.jsonl"}},
		{"journal_drop", func(t *testing.T, dir string) {
			editLines(t, dir, func(lines [][]byte) [][]byte { return slices.Delete(lines, 1, 2) })
		}, []string{"journal.chain", att1 + ".subject.journal.jsonl"}},
		{"journal_drop_rechained", func(t *testing.T, dir string) {
			editLines(t, dir, func(lines [][]byte) [][]byte { return rechain(t, slices.Delete(lines, 1, 2)) })
		}, []string{att1 + ".subject.journal.jsonl", att1 + ".journal", cln1 + ".subject.journal.jsonl"}},
		{"journal_drop_last", func(t *testing.T, dir string) {
			editLines(t, dir, func(lines [][]byte) [][]byte { return lines[:len(lines)-1] })
		}, []string{"journal.tail"}},
		{"journal_reorder", func(t *testing.T, dir string) {
			editLines(t, dir, func(lines [][]byte) [][]byte { lines[1], lines[2] = lines[2], lines[1]; return lines })
		}, []string{"journal.chain", att1 + ".subject.journal.jsonl"}},
		{"journal_reorder_rechained", func(t *testing.T, dir string) {
			editLines(t, dir, func(lines [][]byte) [][]byte { lines[1], lines[2] = lines[2], lines[1]; return rechain(t, lines) })
		}, []string{att1 + ".subject.journal.jsonl", cln1 + ".subject.journal.jsonl"}},
		{"journal_append", func(t *testing.T, dir string) {
			editLines(t, dir, func(lines [][]byte) [][]byte {
				return rechain(t, append(lines, []byte(`{"v":2,"seq":1,"time":"2026-01-01T00:00:00Z","op":"removed","gen":1,"kind":"container","id":"c9"}`)))
			})
		}, []string{"journal.tail"}},
		{"envelope_signature", func(t *testing.T, dir string) {
			editEnvelope(t, filepath.Join(dir, "attestation-1-1.dsse.json"), func(m map[string]any) {
				s := m["signatures"].([]any)[0].(map[string]any)
				sig, _ := base64.StdEncoding.DecodeString(s["sig"].(string))
				sig[0] ^= 1
				s["sig"] = base64.StdEncoding.EncodeToString(sig)
			})
		}, []string{att1 + ".signature", att1 + ".envelope"}},
		{"envelope_payload_type", func(t *testing.T, dir string) {
			editEnvelope(t, filepath.Join(dir, "attestation-1-1.dsse.json"), func(m map[string]any) { m["payloadType"] = "application/json" })
		}, []string{att1 + ".signature", att1 + ".envelope"}},
		{"envelope_resigned_by_another_key", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "attestation-1-1.dsse.json")
			_, other, _ := ed25519.GenerateKey(rand.Reader)
			st := payloadOf(t, readFile(t, path))
			env, err := custody.Sign(t.Context(), other, custody.NewStatement(st.PredicateType, st.Predicate, st.Subject...))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, env, 0o600)
		}, []string{att1 + ".signature", att1 + ".envelope"}},
		{"envelope_removed", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "cleanup-1-1.dsse.json"))
		}, []string{cln1 + ".envelope", "journal.tail"}},
		{"report_removed_and_envelope_changed", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, att2))
			editPayload(t, filepath.Join(dir, "attestation-1-2.dsse.json"), func(m map[string]any) { m["predicateType"] = "x" })
		}, []string{att2 + ".signature", att2 + ".journal"}},
		{"report_removed", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, att2))
		}, []string{att2 + ".journal", att2 + ".predicate", att2 + ".subject." + att2, cln1 + ".subject." + att2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, key := signedCampaign(t, lifecycle{})
			cp := copyDir(t, dir)
			tt.tamper(t, cp)
			res := verifyDir(t, cp, pubOf(key), custody.Options{})
			if res.OK {
				t.Fatalf("verified after tampering:\n%s", details(res))
			}
			for _, w := range tt.want {
				if !slices.Contains(res.Failed, w) {
					t.Errorf("%s did not fail; failed: %v\n%s", w, res.Failed, details(res))
				}
			}
		})
	}
}

// TestTamperNamesTheField: a report with one field changed, added or
// removed fails .predicate naming that field by its path, with what was
// signed and what the file has; a subject (a spec, the daemon record)
// only has its digest signed, and says so.
func TestTamperNamesTheField(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(m map[string]any)
		says string
	}{
		{"changed", func(m map[string]any) { m["ok"] = false }, ".ok: signed true, the file has false"},
		{"nested", func(m map[string]any) { m["images"].([]any)[0].(map[string]any)["id"] = "sha256:0" },
			`.images[0].id: signed "sha256:`},
		{"added", func(m map[string]any) { m["extra"] = 1 }, ".extra: not signed, the file has 1"},
		{"removed", func(m map[string]any) { delete(m, "generation") }, ".generation: signed 1, the file has none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, key := signedCampaign(t, lifecycle{})
			cp := copyDir(t, dir)
			editJSON(t, filepath.Join(cp, att1), tt.edit)
			res := verifyDir(t, cp, pubOf(key), custody.Options{})
			c := check(res, att1+".predicate")
			if c == nil || c.OK || !strings.Contains(c.Detail, tt.says) {
				t.Fatalf("%s: %+v, want it to say %q\n%s", att1+".predicate", c, tt.says, details(res))
			}
		})
	}
	dir, key := signedCampaign(t, lifecycle{})
	cp := copyDir(t, dir)
	editJSON(t, filepath.Join(cp, "spec-1.json"), func(m map[string]any) { m["campaign_id"] = "other" })
	res := verifyDir(t, cp, pubOf(key), custody.Options{})
	if c := check(res, att1+".subject.spec-1.json"); c == nil || c.OK || !strings.Contains(c.Detail, "only its digest was signed") {
		t.Fatalf("a changed spec: %+v", c)
	}
}

// TestCleanupMustFollowAttestation: a cleanup whose statement does not
// name the attestation of its generation fails .follows.
func TestCleanupMustFollowAttestation(t *testing.T) {
	dir, key := signedCampaign(t, lifecycle{NoFollow: true})
	res := verifyDir(t, dir, pubOf(key), custody.Options{})
	if res.OK || !slices.Equal(res.Failed, []string{cln1 + ".follows"}) {
		t.Fatalf("ok %v failed %v", res.OK, res.Failed)
	}
}

// TestVerifyNothingSigned: a journal that records no report is not
// verified.
func TestVerifyNothingSigned(t *testing.T) {
	dir, key := signedCampaign(t, lifecycle{})
	cp := copyDir(t, dir)
	editLines(t, cp, func(lines [][]byte) [][]byte { return lines[:3] })
	res := verifyDir(t, cp, pubOf(key), custody.Options{})
	if res.OK || !slices.Contains(res.Failed, "reports") {
		t.Fatalf("ok %v failed %v", res.OK, res.Failed)
	}
}

func hasCheck(res *custody.Result, id string) bool { return check(res, id) != nil }

func check(res *custody.Result, id string) *custody.Check {
	for i := range res.Checks {
		if res.Checks[i].ID == id {
			return &res.Checks[i]
		}
	}
	return nil
}

func details(res *custody.Result) string {
	var b strings.Builder
	for _, c := range res.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		b.WriteString(mark + " " + c.ID + ": " + c.Detail + "\n")
	}
	return b.String()
}

func editJSON(t *testing.T, path string, fn func(map[string]any)) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFile(t, path), &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func editEnvelope(t *testing.T, path string, fn func(map[string]any)) {
	t.Helper()
	editJSON(t, path, fn)
}

// editPayload edits the statement inside an envelope, keeping its
// signature.
func editPayload(t *testing.T, path string, fn func(map[string]any)) {
	t.Helper()
	editEnvelope(t, path, func(env map[string]any) {
		b, err := base64.StdEncoding.DecodeString(env["payload"].(string))
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		fn(st)
		b, _ = json.Marshal(st)
		env["payload"] = base64.StdEncoding.EncodeToString(b)
	})
}

func payloadOf(t *testing.T, env []byte) custody.Statement[json.RawMessage] {
	t.Helper()
	var e struct{ Payload string }
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	b, _ := base64.StdEncoding.DecodeString(e.Payload)
	var st custody.Statement[json.RawMessage]
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// editLines rewrites the journal's lines (without their newlines).
func editLines(t *testing.T, dir string, fn func([][]byte) [][]byte) {
	t.Helper()
	path := filepath.Join(dir, campaign.JournalFile)
	lines := bytes.Split(bytes.TrimSuffix(readFile(t, path), []byte("\n")), []byte("\n"))
	lines = fn(lines)
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rechain renumbers the lines and recomputes each one's hash of the line
// before it, as someone who can write the journal (but has not the key)
// would to hide an edit from the chain.
func rechain(t *testing.T, lines [][]byte) [][]byte {
	t.Helper()
	prev := ""
	out := make([][]byte, len(lines))
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		m["seq"] = i + 1
		if prev == "" {
			delete(m, "prev")
		} else {
			m["prev"] = prev
		}
		b, _ := json.Marshal(m)
		out[i] = b
		sum := sha256.Sum256(b)
		prev = hex.EncodeToString(sum[:])
	}
	return out
}
