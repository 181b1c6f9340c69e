package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/adapter/kube"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
)

// Images lists the images agentpen builds locally (make images).
var requiredImages = []string{"agentpen/python-base:bookworm", "agentpen/workbench:dev"}

// doctorReport is the --json output of doctor.
type doctorReport struct {
	OK            bool              `json:"ok"`
	Error         string            `json:"error,omitempty"`
	DockerHost    string            `json:"docker_host,omitempty"`
	CustomSocket  bool              `json:"custom_socket,omitempty"`
	Daemon        *campaign.Daemon  `json:"daemon,omitempty"`
	Images        map[string]string `json:"images,omitempty"`
	MissingImages []string          `json:"missing_images,omitempty"`
	// UserNamespaces says whether the kernel lets the workspaces' root
	// make user namespaces (the workbench's sandbox needs them); a
	// daemon's host only.
	UserNamespaces bool `json:"user_namespaces"`
	// Cluster is what a cluster (--kubeconfig) answered, and Attestable
	// whether up and serve can hand out its campaigns.
	Cluster    *kube.Checkup `json:"cluster,omitempty"`
	Attestable bool          `json:"attestable"`
}

func doctor(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "doctor", "[--json] [--allow-custom-socket | --kubeconfig FILE [--kube-node NODE]]",
		"Resolves DOCKER_HOST, connects to the daemon, refuses it unless it is rootless, checks that\n"+
			"the kernel lets unprivileged users make user namespaces (the workbench's sandbox needs them),\n"+
			"and prints the daemon's identity, whether memory and pids limits are enforced, and which\n"+
			"agentpen images exist.\n"+
			"With --kubeconfig it checks the cluster instead: its identity, that a node pods may run on is\n"+
			"Ready, that the kubeconfig's user may make every call custody needs (one\n"+
			"SelfSubjectAccessReview each; nothing is created), and which agentpen images the nodes hold.\n"+
			"Exit status: 0 when the runtime is usable; otherwise a one-line reason and 2 for a bad\n"+
			"DOCKER_HOST, kubeconfig or flag, 3 when the daemon or API server does not answer, 1 when it is\n"+
			"not usable (not rootless, no user namespaces, a permission denied, no Ready node: the message\n"+
			"says what to change).",
		stdout)
	asJSON := fs.Bool("json", false, "print a JSON report on stdout")
	var rf runtimeFlags
	rf.register(fs, getenv)
	timeout := fs.Duration("timeout", 20*time.Second, "overall deadline")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	rep := doctorReport{}
	fail := func(err error) error {
		rep.Error = err.Error()
		if *asJSON {
			if werr := cli.WriteJSON(stdout, rep); werr != nil {
				return errors.Join(err, werr)
			}
		}
		fmt.Fprintf(stderr, "agentpen doctor: %v\n", err)
		return fmt.Errorf("doctor: %w: %w", cli.ErrReported, err)
	}
	var d driver.Driver
	if rf.kubeconfig != "" {
		kd, err := rf.openCluster(ctx)
		if err != nil {
			return fail(err)
		}
		defer kd.Close()
		c, err := kd.Checkup(ctx)
		if err != nil {
			return fail(err)
		}
		rep.Cluster, d = &c, kd
	} else {
		if host, err := docker.HostFromEnv(getenv, rf.allowCustom); err == nil {
			rep.DockerHost, rep.CustomSocket = host.URL, host.Custom
		}
		dd, err := connect(ctx, getenv, rf.allowCustom)
		if err != nil {
			return fail(err)
		}
		defer dd.Close()
		daemon := dd.Daemon()
		rep.Daemon, d = &daemon, dd
	}
	rep.Attestable = d.Info().Capabilities.Attestable
	list, err := d.Images(ctx)
	if err != nil {
		return fail(err)
	}
	imgs := map[string]string{}
	held := map[string]bool{}
	for _, img := range list {
		for _, tag := range img.Tags {
			if strings.Contains(tag, "agentpen/") {
				imgs[tag] = img.ID
				held[campaign.QualifiedName(tag)] = true
			}
		}
	}
	rep.Images = imgs
	for _, want := range requiredImages {
		if !held[campaign.QualifiedName(want)] {
			rep.MissingImages = append(rep.MissingImages, want)
		}
	}
	if rep.Cluster != nil {
		if err := rep.Cluster.Usable(); err != nil {
			return fail(err)
		}
	} else {
		if err := checkUserNamespaces(os.ReadFile, tryUserNamespace); err != nil {
			return fail(err)
		}
		rep.UserNamespaces = true
	}
	rep.OK = true
	if *asJSON {
		return cli.WriteJSON(stdout, rep)
	}
	if rep.Cluster != nil {
		printCluster(stdout, rep)
	} else {
		printDoctor(stdout, rep)
	}
	return nil
}

func printCluster(w io.Writer, rep doctorReport) {
	c := rep.Cluster
	fmt.Fprintf(w, "api server      %s (%s)\n", c.Server, c.Version)
	fmt.Fprintf(w, "cluster         %s\n", c.Identity)
	for _, n := range c.Nodes {
		fmt.Fprintf(w, "node            %s %s\n", n.Name, map[bool]string{true: "Ready", false: "not Ready"}[n.Ready])
	}
	fmt.Fprintf(w, "permissions     all %d custody needs\n", len(kube.Permissions()))
	if rep.Attestable {
		fmt.Fprintf(w, "attestation     from the API server's answers and probes through pods/exec; network policies stored, not proven enforced (docs/kubernetes.md)\n")
	} else {
		fmt.Fprintf(w, "attestation     none: up and serve refuse this runtime; down, verify, orphans, ls and reconcile work\n")
	}
	printImages(w, rep)
}

func printDoctor(w io.Writer, rep doctorReport) {
	d := rep.Daemon
	yes := func(b bool, no string) string {
		if b {
			return "enforced"
		}
		return "NOT enforced (" + no + ")"
	}
	why := "cgroup driver " + d.CgroupDriver
	if d.CgroupDriver == "none" {
		why = "rootless without cgroups: the workbench's per-process rlimits are the only limits, so an agent's total memory is not bounded"
	}
	fmt.Fprintf(w, "docker host     %s%s\n", rep.DockerHost, map[bool]string{true: " (custom socket path)"}[rep.CustomSocket])
	fmt.Fprintf(w, "daemon          %s (ID %s)\n", d.Name, d.ID)
	fmt.Fprintf(w, "server version  %s, API %s (negotiated)\n", d.ServerVersion, d.APIVersion)
	fmt.Fprintf(w, "rootless        yes (%s)\n", strings.Join(d.SecurityOpts, "; "))
	fmt.Fprintf(w, "root dir        %s\n", d.DockerRootDir)
	fmt.Fprintf(w, "cgroups         driver %s, version %s\n", d.CgroupDriver, d.CgroupVersion)
	fmt.Fprintf(w, "memory limits   %s\n", yes(d.MemoryLimitEnforced, why))
	fmt.Fprintf(w, "pids limits     %s\n", yes(d.PidsLimitEnforced, why))
	fmt.Fprintf(w, "user namespaces allowed (each episode runs in namespaces of its own)\n")
	printImages(w, rep)
}

func printImages(w io.Writer, rep doctorReport) {
	names := make([]string, 0, len(rep.Images))
	for n := range rep.Images {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		// A node's image imported from an archive has no repository
		// digest: the name alone.
		fmt.Fprintln(w, strings.TrimSpace(fmt.Sprintf("image           %s %s", n, rep.Images[n])))
	}
	for _, n := range rep.MissingImages {
		fmt.Fprintf(w, "image           %s missing (run: make images)\n", n)
	}
}
