package docker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	wbclient "github.com/agentpen/agentpen/workbench/client"
)

// Density (issue 41): what one workspace costs the host's memory, as the
// proportional set size (PSS: each shared page split among the processes
// that map it) of every process of its container, read from
// /proc/<pid>/smaps_rollup (not `free`, which counts the page cache and
// the rest of the machine).

// densityWorkspaces is how many workspaces BenchmarkDensity measures
// together (their shared pages are split among them, as on a host that
// runs many).
const densityWorkspaces = 8

// containerPSS is the PSS of the container's processes: its first
// process (the daemon's State.Pid, a pid of this host: rootless Docker
// shares the host's pid namespace) and every descendant.
func containerPSS(ctx context.Context, cli *client.Client, id string) (int64, error) {
	info, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		return 0, err
	}
	if info.State == nil || info.State.Pid <= 0 {
		return 0, fmt.Errorf("container %s: no process", short(id))
	}
	var total int64
	todo := []int{info.State.Pid}
	for len(todo) > 0 {
		pid := todo[0]
		todo = todo[1:]
		pss, err := processPSS(pid)
		if err != nil {
			if os.IsNotExist(err) {
				continue // it ended meanwhile
			}
			return 0, err
		}
		total += pss
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, t := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					todo = append(todo, c)
				}
			}
		}
	}
	return total, nil
}

// processPSS is the process's Pss line of /proc/<pid>/smaps_rollup, in
// bytes.
func processPSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "Pss:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("pid %d: no Pss in smaps_rollup", pid)
}

// BenchmarkDensity brings up a campaign of the grader and 8 workspaces
// (topology none) and reports the median PSS of one workspace's container
// in three states, each measured on all 8 once they are in it:
// pss-idle-bytes, as brought up (the workbench serving, no session);
// pss-template-bytes, with a session open and reset (the episode's
// sandbox made and its fork server's template started: what a session
// holds before its first run); pss-live-bytes, after a run_python in
// that session (the template's runs' server up, a live episode). The
// grader's own PSS is pss-grader-bytes (one per campaign). Each state is
// read after a settling second: the template starts in the background.
//
//	go test -run '^$' -bench Density -benchtime 1x ./adapter/docker
func BenchmarkDensity(b *testing.B) {
	a, cli, img := benchAdapter(b)
	ctx := b.Context()
	var idle, tmpl, live, grader []int64
	for range rounds(b, 1) {
		id := benchCampaignID("density")
		b.Cleanup(func() { removeLabelled(cli, id) })
		res, err := a.Up(ctx, benchSpec(id, img, densityWorkspaces, campaign.TopologyNone), adapter.UpOptions{})
		if err != nil {
			b.Fatal(err)
		}
		measure := func(into *[]int64) {
			time.Sleep(time.Second)
			for _, w := range res.Campaign.Workspaces {
				pss, err := containerPSS(ctx, cli, w.ContainerID)
				if err != nil {
					b.Fatal(err)
				}
				*into = append(*into, pss)
			}
		}
		measure(&idle)
		pss, err := containerPSS(ctx, cli, res.Campaign.ServerID)
		if err != nil {
			b.Fatal(err)
		}
		grader = append(grader, pss)
		sessions := make([]*wbclient.Session, len(res.Campaign.Workspaces))
		var g errgroup.Group
		for i, w := range res.Campaign.Workspaces {
			g.Go(func() error {
				s, err := wbclient.Dial(ctx, w.Socket)
				if err != nil {
					return err
				}
				sessions[i] = s
				_, err = s.Reset(ctx, wbclient.ResetOptions{})
				return err
			})
		}
		err = g.Wait()
		defer func() {
			for _, s := range sessions {
				if s != nil {
					s.Close()
				}
			}
		}()
		if err != nil {
			b.Fatal(err)
		}
		measure(&tmpl)
		for _, s := range sessions {
			g.Go(func() error {
				_, err := s.Step(ctx, "run_python", []byte(`{"code":"print(1)"}`))
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		measure(&live)
		b.Logf("PSS per workspace (MiB): idle %v, template %v, live %v; grader %v", mib(idle), mib(tmpl), mib(live), mib(grader))
		if _, err := a.Cleanup(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	for name, v := range map[string][]int64{"idle": idle, "template": tmpl, "live": live, "grader": grader} {
		if len(v) > 0 {
			slices.Sort(v)
			b.ReportMetric(float64(v[len(v)/2]), "pss-"+name+"-bytes")
		}
	}
}

// mib is each value in MiB, to one decimal.
func mib(v []int64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x*10>>20) / 10
	}
	return out
}
