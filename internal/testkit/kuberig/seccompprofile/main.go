// Command seccompprofile prints the workspace's seccomp profile
// (docker.WorkspaceSeccomp) on standard output: scripts/kube-node.sh
// installs it on the node as the kubelet's Localhost profile
// agentpen/workspace.json, so a workspace pod runs under the profile a
// workspace container gets from Docker.
package main

import (
	"fmt"

	"github.com/agentpen/agentpen/adapter/docker"
)

func main() { fmt.Println(docker.WorkspaceSeccomp()) }
