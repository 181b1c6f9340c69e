package kube

// LeaveWorkspacesUnplaced has d make workspace pods without a node, so
// that they stay Pending on a cluster without a scheduler while the
// grader runs on Config.NodeName: a campaign wider than the kubelet's 110
// pods is made and removed against the API server.
func LeaveWorkspacesUnplaced(d *Driver) { d.unplaced = true }
