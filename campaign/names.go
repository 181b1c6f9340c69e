package campaign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// OpaqueAgentID derives "agent-<24 hex>" from the campaign, task and attempt
// ids: an HMAC-SHA256 under key, the state root's agent-id secret, so the
// agent's identity never reveals the task (agent code can read its own
// agent id, and a campaign id is often guessable: without the key it
// could hash candidate tasks until one matched) and a retry (a new attempt
// id) never collides with an earlier attempt. A nil key (a plan that is
// only checked, never brought up) hashes without one.
func OpaqueAgentID(key []byte, campaignID, taskID, attemptID string) string {
	msg := []byte("agentpen-agent\x00" + campaignID + "\x00" + taskID + "\x00" + attemptID)
	var sum []byte
	if key == nil {
		s := sha256.Sum256(msg)
		sum = s[:]
	} else {
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		sum = m.Sum(nil)
	}
	return "agent-" + hex.EncodeToString(sum)[:24]
}

// shortHash is the first n hex digits of sha256 of the parts joined by NUL.
func shortHash(n int, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:n]
}

// Key is the name component of a campaign id: a readable slug and a hash
// of the exact id, so distinct ids never share names. It names the
// campaign's state directory and its run directories too.
func Key(campaignID string) string {
	slug := dnsSlug(campaignID)
	if len(slug) > 24 {
		slug = strings.TrimRight(slug[:24], "-")
	}
	return slug + "-" + shortHash(10, "agentpen-campaign", campaignID)
}

// DNSAlias is a campaign-scoped DNS label for a role ("server", or the
// agent id for a workspace): at most 63 characters, ending in a hash.
func DNSAlias(campaignID, role, component string) string {
	prefix := "agentpen-" + dnsSlug(role) + "-" + dnsSlug(campaignID) + "-" + dnsSlug(component)
	if len(prefix) > 52 {
		prefix = prefix[:52]
	}
	return strings.TrimRight(prefix, "-") + "-" + shortHash(10, campaignID, role, component)
}

// NoProxy is the NO_PROXY value for reaching the server alias directly.
func NoProxy(alias string, port int) string {
	return alias + "," + alias + ":" + strconv.Itoa(port)
}

// containsToken reports whether token occurs in s (both lower-cased) not
// flanked by letters or digits: seed 004's task-exposure test.
func containsToken(s, token string) bool {
	if token == "" {
		return false
	}
	s, token = strings.ToLower(s), strings.ToLower(token)
	isAlnum := func(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
	for i := 0; ; {
		j := strings.Index(s[i:], token)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(token)
		if (start == 0 || !isAlnum(s[start-1])) && (end == len(s) || !isAlnum(s[end])) {
			return true
		}
		i = start + 1
	}
}

// exposesTask reports whether v spells the task id, or its family (the id
// without its "@variant": "software/median" of "software/median@3"), raw
// or as a DNS slug: the family alone tells an agent which task it has.
func exposesTask(v, taskID string) bool {
	family, _, _ := strings.Cut(taskID, "@")
	for _, t := range []string{taskID, family} {
		if containsToken(v, t) || containsToken(v, dnsSlug(t)) {
			return true
		}
	}
	return false
}

// dnsSlug lower-cases s and turns every run of other characters into "-".
func dnsSlug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if out == "" {
		return "item"
	}
	return out
}
