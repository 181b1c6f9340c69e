package adapter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
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
				return map[string]string{campaign.DefaultAPIKeyEnv: "bench-key-0123456789abcdef"}[k]
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

// BenchmarkCleanup16 brings up the workbench grader and 16 workspaces
// (untimed) and times their cleanup: resolution, proof, removal,
// re-inspection and the label listing, the report written. raw-ms is the
// raw limit measured in the same run: the same number of running
// containers and a network removed by direct SDK calls, eight at a time,
// with no journal and no proof.
//
//	go test -run '^$' -bench Cleanup16 -benchtime 3x ./adapter
func BenchmarkCleanup16(b *testing.B) {
	d, cli := realDockerB(b)
	img := imageIDB(b, cli, workbenchImage)
	base := imageIDB(b, cli, pythonBase)
	a := &adapter.Adapter{Docker: d, StateRoot: b.TempDir(), Getenv: func(k string) string {
		return map[string]string{campaign.DefaultAPIKeyEnv: "bench-key-0123456789abcdef"}[k]
	}}
	taskIDs := make([]string, 16)
	for i := range taskIDs {
		taskIDs[i] = e2eTasks[i%len(e2eTasks)]
	}
	var clean, raw time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		id := fmt.Sprintf("bench-clean-%d-%d", time.Now().UnixNano(), i)
		if _, err := a.BringUp(b.Context(), workbenchSpec(id, img, taskIDs)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		rep, err := a.Cleanup(b.Context(), id)
		clean += time.Since(start)
		b.StopTimer()
		if err != nil || rep.Status != "verified" {
			b.Fatalf("cleanup: %v", err)
		}
		raw += rawRemoval(b, cli, base, 17)
		b.StartTimer()
	}
	b.ReportMetric(float64(clean.Milliseconds())/float64(b.N), "cleanup-ms")
	b.ReportMetric(float64(raw.Milliseconds())/float64(b.N), "raw-ms")
	b.ReportMetric(float64(clean)/float64(raw), "ratio")
}

// rawRemoval creates n running containers on a network of their own and
// returns how long removing them (eight at a time) and the network took.
func rawRemoval(b *testing.B, cli *client.Client, img string, n int) time.Duration {
	ctx := b.Context()
	net, err := cli.NetworkCreate(ctx, fmt.Sprintf("bench-raw-%d", time.Now().UnixNano()), network.CreateOptions{Internal: true})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	g := new(errgroup.Group)
	g.SetLimit(4)
	for i := range ids {
		g.Go(func() error {
			resp, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "600"}},
				&container.HostConfig{Init: ptrTo(true), NetworkMode: container.NetworkMode(net.ID)}, nil, nil, "")
			if err != nil {
				return err
			}
			ids[i] = resp.ID
			return cli.ContainerStart(ctx, resp.ID, container.StartOptions{})
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	g = new(errgroup.Group)
	g.SetLimit(8)
	for _, id := range ids {
		g.Go(func() error { return cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := cli.NetworkRemove(ctx, net.ID); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func ptrTo[T any](v T) *T { return &v }
