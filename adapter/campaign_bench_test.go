package adapter_test

import (
	"fmt"
	"github.com/agentpen/agentpen/campaign"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
)

// BenchmarkCampaign brings a campaign of the workbench grader and N
// workspaces up (until every one is ready) and tears it down, on the real
// rootless daemon. ns/op is the whole cycle; up-ms and down-ms split it.
// Run with: make bench, or
//
//	go test -run '^$' -bench Campaign -count 5 ./adapter
func BenchmarkCampaign(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("workspaces=%d", n), func(b *testing.B) {
			d, cli := realDockerB(b)
			img := imageIDB(b, cli, workbenchImage)
			a := &adapter.Adapter{Docker: d, StateRoot: b.TempDir(), Getenv: func(k string) string {
				return map[string]string{campaign.DefaultAPIKeyEnv: "bench-key"}[k]
			}}
			taskIDs := make([]string, n)
			for i := range taskIDs {
				taskIDs[i] = e2eTasks[i%len(e2eTasks)]
			}
			var up, down time.Duration
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("bench-%d-%d-%d", n, time.Now().UnixNano(), i)
				start := time.Now()
				if _, err := a.BringUp(b.Context(), workbenchSpec(id, img, taskIDs)); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := a.TearDown(b.Context(), id); err != nil {
					b.Fatal(err)
				}
				up += mid.Sub(start)
				down += time.Since(mid)
			}
			b.ReportMetric(float64(up.Milliseconds())/float64(b.N), "up-ms")
			b.ReportMetric(float64(down.Milliseconds())/float64(b.N), "down-ms")
		})
	}
}
