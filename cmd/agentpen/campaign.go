package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
)

// campaignFlags are the flags up and down share.
type campaignFlags struct {
	stateRoot   string
	allowCustom bool
	logFormat   string
}

func (c *campaignFlags) register(fs *cli.FlagSet, getenv func(string) string) {
	fs.StringVar(&c.stateRoot, "state-root", defaultStateRoot(getenv), "directory holding one state directory (journal, spec) per campaign")
	fs.BoolVar(&c.allowCustom, "allow-custom-socket", false, "accept a DOCKER_HOST socket path that does not look rootless (the daemon must still say rootless)")
	fs.StringVar(&c.logFormat, "log-format", "text", "progress log format on stderr: text or json")
}

// defaultStateRoot is $XDG_STATE_HOME/agentpen, else ~/.local/state/agentpen.
func defaultStateRoot(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "agentpen")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "agentpen")
	}
	return filepath.Join(os.TempDir(), "agentpen-state")
}

func (c *campaignFlags) adapter(ctx context.Context, stderr io.Writer, getenv func(string) string) (*adapter.Adapter, error) {
	var h slog.Handler
	switch c.logFormat {
	case "text":
		h = slog.NewTextHandler(stderr, nil)
	case "json":
		h = slog.NewJSONHandler(stderr, nil)
	default:
		return nil, cli.Usagef("--log-format %q: want text or json", c.logFormat)
	}
	host, err := adapter.HostFromEnv(getenv, c.allowCustom)
	if err != nil {
		return nil, err
	}
	d, err := adapter.Connect(ctx, host)
	if err != nil {
		return nil, err
	}
	return &adapter.Adapter{Docker: d, StateRoot: c.stateRoot, Logger: slog.New(h), Getenv: getenv}, nil
}

// upResult is what up prints on stdout.
type upResult struct {
	CampaignID string        `json:"campaign_id"`
	Generation int           `json:"generation"`
	Instance   string        `json:"instance"`
	StateDir   string        `json:"state_dir"`
	Network    string        `json:"network_id"`
	Server     upServer      `json:"server"`
	Workspaces []upWorkspace `json:"workspaces"`
}

type upServer struct {
	ContainerID string `json:"container_id"`
	Alias       string `json:"alias"`
	URL         string `json:"url"`
}

type upWorkspace struct {
	Index       int    `json:"index"`
	AgentID     string `json:"agent_id"`
	ContainerID string `json:"container_id"`
	Socket      string `json:"socket"`
}

func up(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "up", "[flags] SPEC.json|-",
		"Validates a campaign spec (JSON; see campaign.CampaignSpec), then creates its network, server and\n"+
			"workspaces on the rootless daemon, journalling each create, and waits until all are ready.\n"+
			"Prints the campaign's ids as JSON on stdout; progress goes to stderr. On failure everything\n"+
			"created is removed through the cleanup path (by exact id, verified; report in the state\n"+
			"directory) and the journal says so. Images are never pulled. A campaign id that has live\n"+
			"resources (in this state root's journal, or on the daemon under any state root) is refused;\n"+
			"one whose earlier generation was verified removed starts a new generation.\n"+
			"Exit status: 0 up, 1 failed and rolled back, 2 bad input, 3 daemon unreachable, 4 conflict,\n"+
			"130/143 interrupted (rolled back; a second signal exits at once, leaving it to agentpen down).",
		stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	timeout := fs.Duration("ready-timeout", adapter.DefaultReadyTimeout, "how long each container may take to become ready")
	parallel := fs.Int("parallel", adapter.DefaultParallelism, "workspaces created at once")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	if name := pos[0]; name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("spec: %w", err)
		}
		defer f.Close()
		in = f
	}
	spec, err := campaign.DecodeSpec(in)
	if err != nil {
		return fmt.Errorf("spec %s: %w", pos[0], err)
	}
	// Bad input is refused before any daemon is asked anything.
	if _, err := campaign.NewPlan(spec); err != nil {
		return err
	}
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Docker.Close()
	a.ReadyTimeout, a.Parallelism = *timeout, *parallel
	start := time.Now()
	c, err := a.BringUp(ctx, spec)
	if err != nil {
		return err
	}
	a.Logger.Info("campaign up", "campaign", spec.CampaignID, "took", time.Since(start).Round(time.Millisecond))
	res := upResult{
		CampaignID: c.Plan.CampaignID, Generation: c.Plan.Generation, Instance: c.Plan.Instance, StateDir: c.Dir, Network: c.NetworkID,
		Server: upServer{ContainerID: c.ServerID, Alias: c.Plan.Server.Alias, URL: c.Plan.Server.URL},
	}
	for i, ws := range c.Workspaces {
		res.Workspaces = append(res.Workspaces, upWorkspace{Index: i, AgentID: ws.AgentID, ContainerID: ws.ContainerID, Socket: ws.Socket})
	}
	return cli.WriteJSON(stdout, res)
}
