// Package kube is agentpen's driver (package adapter/driver) of a
// Kubernetes cluster, on k8s.io/client-go: plain API calls, no informer
// or cache (agentpen is not a controller, and its custody checks need
// live reads).
//
// A campaign generation is a namespace of its own, labelled with the
// campaign's ownership labels and the Pod Security level it enforces; in
// it a service account with no token automount, the grader key's secret
// (referenced by the pods, never written into a pod spec, the journal or
// a report), network policies that deny every connection but each
// workspace's to the grader's port, the grader's pod and a pod per
// workspace (hostUsers false, every capability dropped but the four the
// episode sandbox needs, the seccomp profile the rig installs, the run
// directory an emptyDir). Plain pods, never a Deployment: agentpen owns
// their lifecycle (layout.go).
//
// Custody is the engine's, as on Docker: every object is journalled as an
// intent before it is made and by its UID after; a namespaced object's
// journal name is "<namespace>/<name>". Every object carries the finalizer
// io.agentpen/custody, so a deletion is two-phase: a delete with the
// object's UID and observed resourceVersion as preconditions, then the
// finalizer's removal, again only while the UID is the journalled one;
// an agentpen killed between the two finds the object terminating and
// finishes it. Nothing relies on ownerReferences, the garbage collector
// or foreground deletion; an object under the journalled name with
// another UID (a twin) is not the journalled one, and is never touched
// (resources.go).
//
// The attestation (attest/cluster.go) judges what Evidence reads back
// (evidence.go): each journalled pod as the API server answers it, every
// network policy of the campaign's namespace rendered as the rules it
// allows, the cluster's identity; the hardening it expects is read from
// the pods a layout would make by the same function (settingsOf).
//
// Workspaces are reached through the API server alone: their workbench
// through pods/portforward to the pod's loopback, their bind file,
// activity and results through pods/exec (workspace.go). Images are the
// nodes' (images.go); a pod pins its image by repo digest with
// imagePullPolicy Never.
package kube
