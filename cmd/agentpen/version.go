package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentpen/agentpen/internal/cli"
)

// versionReport is agentpen version --json.
type versionReport struct {
	cli.Version
	// Daemon is the daemon's version and negotiated API when DOCKER_HOST
	// names a rootless daemon that answers; DaemonError says why not.
	DaemonVersion string `json:"daemon_version,omitempty"`
	DaemonAPI     string `json:"daemon_api,omitempty"`
	DaemonError   string `json:"daemon_error,omitempty"`
}

func version(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "version", "[--json]",
		"Prints agentpen's version, commit, Go version and Docker SDK version, and, when DOCKER_HOST\n"+
			"names a rootless daemon that answers, the daemon's version and the API version negotiated.\n"+
			"A daemon that does not answer is reported, not an error: exit 0.", stdout)
	asJSON := fs.Bool("json", false, "print JSON")
	allowCustom := fs.Bool("allow-custom-socket", false, "accept a DOCKER_HOST socket path that does not look rootless")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	rep := versionReport{Version: cli.ReadVersion()}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if d, err := connect(cctx, getenv, *allowCustom); err != nil {
		rep.DaemonError = err.Error()
	} else {
		rep.DaemonVersion, rep.DaemonAPI = d.Daemon().ServerVersion, d.Daemon().APIVersion
		d.Close()
	}
	if *asJSON {
		return cli.WriteJSON(stdout, rep)
	}
	mod := ""
	if rep.Modified {
		mod = " (modified)"
	}
	fmt.Fprintf(stdout, "agentpen    %s\ncommit      %s%s\ngo          %s\ndocker sdk  %s\n", rep.Version.Version, rep.Commit, mod, rep.GoVersion, rep.DockerSDK)
	if rep.DaemonError != "" {
		fmt.Fprintf(stdout, "daemon      not reached: %s\n", rep.DaemonError)
	} else {
		fmt.Fprintf(stdout, "daemon      %s, API %s\n", rep.DaemonVersion, rep.DaemonAPI)
	}
	return nil
}
