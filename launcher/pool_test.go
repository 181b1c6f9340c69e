package launcher

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClaimsShareTheCampaign: claims of one campaign reach the engine
// together (it serves them in batches), not one after another as the
// service's operations on a campaign do; a DELETE still waits for the
// claims under way, and runs once they end.
func TestClaimsShareTheCampaign(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	const id = "shared-claims"
	ts.createWith(t, testToken, id, func(m map[string]any) { m["pool"] = 2 })

	in := make(chan struct{}, 2)
	release := make(chan struct{})
	be.mu.Lock()
	be.claimGate = func() { in <- struct{}{}; <-release }
	be.mu.Unlock()
	post := func(method, path, body string) int {
		req, err := http.NewRequest(method, ts.ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := ts.ts.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			codes[i] = post(http.MethodPost, "/v1/campaigns/"+id+"/workspaces", fmt.Sprintf(`{"task_id":"software/median@7","attempt_id":"c%d"}`, i))
		})
	}
	for range codes {
		select {
		case <-in:
		case <-time.After(10 * time.Second):
			close(release)
			wg.Wait()
			t.Fatalf("the claims did not reach the engine together: %v", be.Calls())
		}
	}
	var deleted int
	wg.Go(func() { deleted = post(http.MethodDelete, "/v1/campaigns/"+id, "") })
	// The DELETE waits for the claims: give it the time to get ahead.
	time.Sleep(100 * time.Millisecond)
	if calls := be.Calls(); slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "Cleanup") }) {
		t.Errorf("the removal ran while claims were under way: %v", calls)
	}
	close(release)
	wg.Wait()
	if codes[0] != http.StatusCreated || codes[1] != http.StatusCreated || deleted != http.StatusOK {
		t.Fatalf("claims %v, delete %d", codes, deleted)
	}
}
