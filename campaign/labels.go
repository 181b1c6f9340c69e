package campaign

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// Label keys agentpen sets on everything it creates. Launchers may add
// labels of their own, never under ReservedLabelPrefix.
const (
	LabelCampaign = "io.agentpen.campaign"
	LabelRole     = "io.agentpen.role"
	LabelAgent    = "io.agentpen.agent"
	LabelNetwork  = "io.agentpen.network"
	LabelOwner    = "io.agentpen.owner"
	LabelSchema   = "io.agentpen.schema"
	// LabelInstance carries the nonce of the bring-up (generation) that
	// created the resource: ownership is the campaign labels and this
	// instance, which a twin campaign (same id, another state root) does
	// not share.
	LabelInstance = "io.agentpen.instance"
	// LabelTopology names the campaign's topology on its containers.
	LabelTopology = "io.agentpen.topology"
	// LabelUIDBlock carries a workspace's uid block ("first-last"): the
	// daemon-wide allocation of blocks reads it from every container.
	LabelUIDBlock = "io.agentpen.uid-block"
	// LabelPoolSlot numbers a pooled workspace (campaign.Plan.PoolAgent):
	// "0", "1", ... in its generation; absent on the spec's workspaces.
	LabelPoolSlot = "io.agentpen.pool-slot"
	// LabelCreate is a secret of one create call: 128 random bits, set
	// on the resource and recorded in its intent, and nowhere else before
	// the daemon has made it. A resource is taken for this create's (when
	// its id never reached the journal) only by its exact name and this
	// value: labels another daemon client can copy from a live resource
	// never adopt one (WithCreateLabel).
	LabelCreate = "io.agentpen.create"
)

// ReservedLabelPrefix is the label namespace agentpen owns.
const ReservedLabelPrefix = "io.agentpen."

// Label values.
const (
	OwnerValue  = "agentpen"
	SchemaValue = "agentpen.v1"
	RoleNetwork = "network"
	// RoleCampaign is a campaign's own object that is none of its
	// networks, servers or workspaces (a cluster's namespace, service
	// account, secret and policies).
	RoleCampaign = "campaign"
	RoleServer   = "server"
	RoleWork     = "workspace"
)

// OwnedBy reports whether the labels a resource carries (have) prove it is
// the one an intent described (want): every reserved (io.agentpen.*) label
// of want is present in have with the same value, and want holds at least
// one. Launcher labels are not evidence and are ignored.
func OwnedBy(have, want map[string]string) bool {
	n := 0
	for k, v := range want {
		if strings.HasPrefix(k, ReservedLabelPrefix) {
			if got, ok := have[k]; !ok || got != v {
				return false
			}
			n++
		}
	}
	return n > 0
}

// WithCreateLabel returns a copy of labels with a fresh LabelCreate.
func WithCreateLabel(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[LabelCreate] = NewInstance()
	return out
}

// NewInstance returns a fresh instance nonce: 32 hex digits from the
// system's random source.
func NewInstance() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
