package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// campaignFlags are the flags up and down share.
type campaignFlags struct {
	keyFlags
	runtimeFlags
	logFormat string
}

func (c *campaignFlags) register(fs *cli.FlagSet, getenv func(string) string) {
	c.keyFlags.register(fs, getenv)
	c.runtimeFlags.register(fs, getenv)
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
	a, _, err := c.adapterWithProgress(ctx, stderr, getenv, "")
	return a, err
}

// adapterWithProgress connects to the daemon and returns the adapter with
// its log on stderr, and the view that shows its progress there under
// title; the caller sets a.Progress = v.step to show it. The text log
// holds warnings only (the view shows the steps); the JSON log holds
// every step as a record.
func (c *campaignFlags) adapterWithProgress(ctx context.Context, stderr io.Writer, getenv func(string) string, title string) (*adapter.Adapter, *progressView, error) {
	v := newProgressView(stderr, isTerminal(stderr), c.logFormat == "json", title)
	var h slog.Handler
	switch c.logFormat {
	case "text":
		h = slog.NewTextHandler(v, &slog.HandlerOptions{Level: slog.LevelWarn})
	case "json":
		h = slog.NewJSONHandler(v, nil)
	default:
		return nil, nil, cli.Usagef("--log-format %q: want text or json", c.logFormat)
	}
	log := slog.New(h)
	a := &adapter.Adapter{Logger: log, Getenv: getenv}
	if c.logFormat == "json" {
		// The steps are the campaign's events, read from the records the
		// adapter journals; the adapter's own info lines would say it
		// twice.
		v.log = log
		a.Logger = slog.New(slog.NewJSONHandler(v, &slog.HandlerOptions{Level: slog.LevelWarn}))
		a.Journalled = v.journalled
	}
	key, err := c.operatorKey()
	if err != nil {
		return nil, nil, err
	}
	d, err := c.openRuntime(ctx, getenv, a.Logger)
	if err != nil {
		return nil, nil, err
	}
	a.Driver, a.SigningKey = d, key
	return a, v, nil
}

// root opens the state root: for reading (one that does not exist holds
// no campaign), or, with create, made when missing.
func (c *campaignFlags) root(create bool) (*store.Root, error) {
	if create {
		return store.CreateRoot(c.stateRoot)
	}
	return store.OpenRoot(c.stateRoot)
}

// rootAlone opens the state root (made when missing) and takes its
// service lock (store.Root.LockServe): the one process that serves or
// reconciles it.
func (c *campaignFlags) rootAlone() (*store.Root, *store.Lock, error) {
	root, err := c.root(true)
	if err != nil {
		return nil, nil, err
	}
	lock, err := root.LockServe()
	if err != nil {
		root.Close()
		return nil, nil, err
	}
	return root, lock, nil
}

// open opens one campaign of the state root by id.
func (c *campaignFlags) open(id string) (*store.Root, *store.Campaign, error) {
	root, err := c.root(false)
	if err != nil {
		return nil, nil, err
	}
	sc, err := root.Open(id)
	if err != nil {
		root.Close()
		return nil, nil, err
	}
	return root, sc, nil
}

// campaignCmd is what a command on one campaign works with: the adapter
// (its progress view under the command's title) and the campaign, open
// in its state root.
type campaignCmd struct {
	a    *adapter.Adapter
	view *progressView
	root *store.Root
	c    *store.Campaign
}

// openCampaign checks the campaign id (bad input before anything is
// connected), connects the adapter and opens the campaign; the caller
// defers close.
func (c *campaignFlags) openCampaign(ctx context.Context, stderr io.Writer, getenv func(string) string, id, title string) (*campaignCmd, error) {
	if err := campaign.CheckID("campaign_id", id); err != nil {
		return nil, err
	}
	a, v, err := c.adapterWithProgress(ctx, stderr, getenv, title)
	if err != nil {
		return nil, err
	}
	root, sc, err := c.open(id)
	if err != nil {
		a.Driver.Close()
		return nil, err
	}
	return &campaignCmd{a: a, view: v, root: root, c: sc}, nil
}

func (cc *campaignCmd) close() {
	cc.c.Close()
	cc.root.Close()
	cc.a.Driver.Close()
}

// downCommand is the command that takes a campaign down, with the state
// root when it is not the default one.
func (c *campaignFlags) downCommand(getenv func(string) string, id string) string {
	cmd := "agentpen down"
	if c.stateRoot != defaultStateRoot(getenv) {
		cmd += " --state-root " + c.stateRoot
	}
	// The cluster the campaign is on, unless the environment names it.
	if c.kubeconfig != "" && c.kubeconfig != getenv(EnvKubeconfig) {
		cmd += " --kubeconfig " + c.kubeconfig
	}
	if c.kubeNode != "" && c.kubeNode != getenv(EnvKubeNode) {
		cmd += " --kube-node " + c.kubeNode
	}
	return cmd + " " + id
}

// upResult is what up prints on stdout.
type upResult struct {
	CampaignID  string              `json:"campaign_id"`
	Generation  int                 `json:"generation"`
	Instance    string              `json:"instance"`
	StateDir    string              `json:"state_dir"`
	Topology    string              `json:"topology"`
	Networks    []string            `json:"network_ids"`
	Server      upServer            `json:"server"`
	Workspaces  []adapter.Workspace `json:"workspaces"`
	Attestation upAttestation       `json:"attestation"`
}

type upAttestation struct {
	OK     bool   `json:"ok"`
	Report string `json:"report"`
}

type upServer struct {
	ContainerID string `json:"container_id"`
	Alias       string `json:"alias"`
	URL         string `json:"url"`
}

func up(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "up", "[flags] SPEC.json|-",
		"Validates a campaign spec (JSON: every field, its default and its limit are in docs/spec.md;\n"+
			"agentpen spec check validates one without a daemon), then creates its server and workspaces\n"+
			"(and their networks, if any) on the rootless daemon, journalling each create, and waits until\n"+
			"all are ready.\n"+
			"Then attests it (see agentpen attest) and fails closed: a campaign whose attestation fails is\n"+
			"removed by exact id and up exits 1 printing the failed checks (--keep-failed keeps it).\n"+
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
	var af attestFlags
	af.register(fs)
	keepFailed := fs.Bool("keep-failed", false, "keep a campaign whose attestation failed (for debugging; remove it with agentpen down)")
	var allowEnv cli.StringList
	fs.Var(&allowEnv, "allow-env", "a variable of agentpen's environment campaigns may copy into their grader (server.secret_env, server.api_key_env), repeatable; "+campaign.DefaultAPIKeyEnv+" is always allowed, AGENTPEN_* never")
	timeout := fs.Duration("ready-timeout", adapter.DefaultReadyTimeout, "how long each container may take to become ready")
	parallel := fs.Int("parallel", 0, "creates, starts and network joins at once (0: the runtime's: 8 on a daemon, 32 on a cluster)")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	opts, err := af.options()
	if err != nil {
		return err
	}
	envPolicy := campaign.EnvPolicy{Allowed: allowEnv}
	if err := campaign.CheckEnvPolicy(envPolicy); err != nil {
		return cli.Usagef("%v", err)
	}
	in, err := readSpecFile(pos[0], os.Stdin)
	if err != nil {
		return err
	}
	spec, err := campaign.DecodeSpec(in)
	if err != nil {
		return fmt.Errorf("spec %s: %w", pos[0], err)
	}
	// Bad input is refused before any daemon is asked anything, as the
	// API refuses it: one validation, whose plan the bring-up takes (its
	// agent ids keyed under the state root's secret).
	// (The runtime's own bound on a campaign's size is checked once it
	// answers: the largest any runtime takes, until then.)
	if _, err := campaign.Validate(spec, tasks.Known, campaign.PlanOptions{MaxWorkspaces: campaign.MaxPoolSlots}); err != nil {
		return err
	}
	if spec.LauncherTimeoutSeconds != 0 {
		return &campaign.ValidationError{Field: "launcher_timeout_seconds", Value: strconv.Itoa(spec.LauncherTimeoutSeconds),
			Msg: "agentpen up has no launcher to watch: only agentpen serve ties a campaign to the launcher that creates it (POST /v1/campaigns); remove the field"}
	}
	root, err := cf.root(true)
	if err != nil {
		return err
	}
	defer root.Close()
	a, view, err := cf.adapterWithProgress(ctx, stderr, getenv, "up "+spec.CampaignID)
	if err != nil {
		return err
	}
	defer a.Driver.Close()
	defer view.finish()
	popts, err := a.PlanOptions(root)
	if err != nil {
		return err
	}
	p, err := campaign.Validate(spec, tasks.Known, popts)
	if err != nil {
		return err
	}
	a.ReadyTimeout, a.Parallelism, a.Progress, a.EnvPolicy = *timeout, *parallel, view.step, envPolicy
	start := time.Now()
	res, err := a.Up(ctx, root, p, adapter.UpOptions{Attest: opts, KeepFailed: *keepFailed})
	view.finish()
	view.final(root, spec.CampaignID)
	if res == nil || res.Campaign == nil {
		return err
	}
	if err != nil {
		return failedAttestation(res, err, cf.downCommand(getenv, spec.CampaignID), stderr)
	}
	c, rep := res.Campaign, res.Report
	out := upResult{
		CampaignID: c.Plan.CampaignID, Generation: c.Plan.Generation, Instance: c.Plan.Instance, StateDir: c.Dir, Topology: string(c.Plan.Topology), Networks: c.NetworkIDs,
		Server:      upServer{ContainerID: c.ServerID, Alias: c.Plan.Server.Alias, URL: c.Plan.Server.URL},
		Attestation: upAttestation{OK: rep.OK, Report: res.ReportPath},
		Workspaces:  c.Workspaces,
	}
	summary := upSummary{res: out, took: time.Since(start), checks: len(rep.Checks()), down: cf.downCommand(getenv, spec.CampaignID)}
	if view.log != nil {
		view.log.Info("campaign up", "campaign", out.CampaignID, "generation", out.Generation, "workspaces", len(out.Workspaces),
			"attestation_ok", rep.OK, "attestation", out.Attestation.Report, "state_dir", out.StateDir, "took", summary.took.Round(time.Millisecond))
	} else {
		summary.print(stderr)
	}
	if werr := cli.WriteJSON(stdout, out); werr != nil {
		// Nobody learns the campaign's ids (a reader that went away, a
		// full disk): a campaign no launcher knows of is not left behind.
		return undelivered(ctx, a, root, spec.CampaignID, werr, stderr)
	}
	return nil
}

// undelivered removes a campaign that came up and attested but whose ids
// up could not write, and returns the error that says so.
func undelivered(ctx context.Context, a *adapter.Adapter, root *store.Root, id string, werr error, stderr io.Writer) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
	defer cancel()
	sc, err := root.Open(id)
	if err != nil {
		return fmt.Errorf("could not write the campaign's ids (%w), and removing it failed: %w (agentpen down %s retries)", werr, err, id)
	}
	defer sc.Close()
	crep, _, terr := a.Cleanup(rctx, sc, campaign.ReasonUndelivered)
	if terr != nil {
		return fmt.Errorf("could not write the campaign's ids (%w), and removing it failed: %w (agentpen down %s retries)", werr, terr, id)
	}
	fmt.Fprintf(stderr, "agentpen up: removed campaign %s, whose ids could not be written: cleanup %s\n", id, crep.Status)
	return fmt.Errorf("could not write the campaign's ids: %w; the campaign was removed (cleanup %s)", werr, crep.Status)
}

// upSummary is what up tells a person at the end, on stderr: one screen.
type upSummary struct {
	res    upResult
	took   time.Duration
	checks int
	down   string
}

// maxSummaryWorkspaces is how many workspaces the summary lists; the JSON
// on stdout lists all.
const maxSummaryWorkspaces = 10

func (s upSummary) print(w io.Writer) {
	r := s.res
	fmt.Fprintf(w, "campaign %s is up: generation %d, %d workspaces, topology %s, in %s\n",
		r.CampaignID, r.Generation, len(r.Workspaces), r.Topology, s.took.Round(100*time.Millisecond))
	fmt.Fprintf(w, "  grader        container %s\n", shortID(r.Server.ContainerID))
	for i, ws := range r.Workspaces {
		if i == maxSummaryWorkspaces {
			fmt.Fprintf(w, "  ... and %d more workspaces (every socket: the JSON on stdout, or agentpen ls --json)\n", len(r.Workspaces)-i)
			break
		}
		where := "socket " + ws.Socket
		if ws.Socket == "" {
			where = "pod " + shortID(ws.ContainerID)
		}
		fmt.Fprintf(w, "  workspace %-3d agent %s, %s\n", ws.Index, ws.AgentID, where)
	}
	fmt.Fprintf(w, "attestation     ok, %d checks passed\n", s.checks)
	fmt.Fprintf(w, "reports         %s (journal.jsonl, spec-%d.json, %s; a cleanup report after down)\n", r.StateDir, r.Generation, filepath.Base(r.Attestation.Report))
	switch {
	case len(r.Workspaces) == 0:
	case r.Workspaces[0].Socket != "":
		fmt.Fprintf(w, "play by hand    workbench client %s\n", r.Workspaces[0].Socket)
	default:
		fmt.Fprintf(w, "play by hand    through agentpen serve's base_url (a cluster's workspace has no socket on this host)\n")
	}
	fmt.Fprintf(w, "take it down    %s\n", s.down)
}

// failedAttestation tells a person what became of a campaign that came
// up and did not attest (adapter.Up removed it, or kept it), on stderr.
func failedAttestation(res *adapter.UpResult, err error, down string, stderr io.Writer) error {
	id := res.Campaign.Plan.CampaignID
	fmt.Fprintf(stderr, "agentpen up: campaign %s did not attest; it is not handed to agents\n", id)
	if res.Report == nil {
		fmt.Fprintf(stderr, "  attestation error: %v\n", err)
	} else {
		for _, line := range res.Report.FailureLines() {
			fmt.Fprintf(stderr, "  %s\n", line)
		}
		fmt.Fprintf(stderr, "  report: %s\n", res.ReportPath)
	}
	switch {
	case res.Kept:
		fmt.Fprintf(stderr, "agentpen up: kept for debugging (--keep-failed); remove it with: %s\n", down)
	case res.Removal == nil:
		fmt.Fprintf(stderr, "agentpen up: removing the campaign failed: %v\n", err)
		return errors.Join(errNotAttested, err)
	default:
		fmt.Fprintf(stderr, "agentpen up: removed the campaign by its journalled ids: cleanup %s (%s)\n", res.Removal.Status, res.RemovalPath)
		if !res.Removal.OK {
			return errors.Join(errNotAttested, err)
		}
	}
	return errNotAttested
}
