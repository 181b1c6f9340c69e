package main

import (
	"fmt"
	"io"

	"github.com/agentpen/agentpen/internal/cli"
)

func runVersion(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet(prog, "version", "[--json]", "Prints the workbench's version, commit and Go version.", stdout)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	v := cli.ReadVersion()
	if *asJSON {
		return cli.WriteJSON(stdout, v)
	}
	mod := ""
	if v.Modified {
		mod = " (modified)"
	}
	fmt.Fprintf(stdout, "workbench  %s\ncommit     %s%s\ngo         %s\n", v.Version, v.Commit, mod, v.GoVersion)
	return nil
}
