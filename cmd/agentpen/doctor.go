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
	// make user namespaces (the workbench's sandbox needs them).
	UserNamespaces bool `json:"user_namespaces"`
}

func doctor(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "doctor", "[--json] [--allow-custom-socket]",
		"Resolves DOCKER_HOST, connects to the daemon, refuses it unless it is rootless, checks that\n"+
			"the kernel lets unprivileged users make user namespaces (the workbench's sandbox needs them),\n"+
			"and prints the daemon's identity, whether memory and pids limits are enforced, and which\n"+
			"agentpen images exist.\n"+
			"Exit status: 0 when the daemon is usable; otherwise a one-line reason and 2 for a bad\n"+
			"DOCKER_HOST or flag, 3 when the daemon does not answer, 1 when it is not usable (not rootless,\n"+
			"or no user namespaces: the message says what to change).",
		stdout)
	asJSON := fs.Bool("json", false, "print a JSON report on stdout")
	allowCustom := fs.Bool("allow-custom-socket", false, "accept a unix socket path that does not look rootless (the daemon must still say rootless)")
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
	if host, err := docker.HostFromEnv(getenv, *allowCustom); err == nil {
		rep.DockerHost, rep.CustomSocket = host.URL, host.Custom
	}
	d, err := connect(ctx, getenv, *allowCustom)
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	daemon := d.Daemon()
	rep.Daemon = &daemon
	list, err := d.Images(ctx)
	if err != nil {
		return fail(err)
	}
	imgs := map[string]string{}
	for _, img := range list {
		for _, tag := range img.Tags {
			if strings.HasPrefix(tag, "agentpen/") {
				imgs[tag] = img.ID
			}
		}
	}
	rep.Images = imgs
	for _, want := range requiredImages {
		if _, ok := imgs[want]; !ok {
			rep.MissingImages = append(rep.MissingImages, want)
		}
	}
	if err := checkUserNamespaces(os.ReadFile, tryUserNamespace); err != nil {
		return fail(err)
	}
	rep.UserNamespaces = true
	rep.OK = true
	if *asJSON {
		return cli.WriteJSON(stdout, rep)
	}
	printDoctor(stdout, rep)
	return nil
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
	names := make([]string, 0, len(rep.Images))
	for n := range rep.Images {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "image           %s %s\n", n, rep.Images[n])
	}
	for _, n := range rep.MissingImages {
		fmt.Fprintf(w, "image           %s missing (run: make images)\n", n)
	}
}
