package adapter

import (
	"fmt"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
)

// BenchmarkClaimFake is the engine's own work of a warm claim, on the
// fake runtime (no daemon): what to profile the claim path with
// (go test ./adapter -run '^$' -bench ClaimFake -cpuprofile cpu.out).
// Each round claims a pool of 64 one at a time.
func BenchmarkClaimFake(b *testing.B) {
	const pool = 64
	d := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(b, d, b.TempDir())
	for i := 0; i < b.N; {
		b.StopTimer()
		c := fakePool(b, a, root, fmt.Sprint("bench-", i), pool)
		b.StartTimer()
		for k := 0; k < pool && i < b.N; k, i = k+1, i+1 {
			if _, err := a.Claim(b.Context(), c, "software/median", fmt.Sprint("a", k), AttestOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
