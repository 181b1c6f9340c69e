// Package driver is the contract between agentpen's engine (package
// adapter) and a runtime that holds campaigns: a rootless Docker daemon
// (adapter/docker), a Kubernetes cluster. It holds the interface a
// runtime implements and the neutral types that cross it, as
// database/sql/driver does for database/sql.
//
// The engine owns every use case and the custody discipline: it plans a
// campaign, journals the intent of each resource before the driver creates
// it and the id the runtime answered after, decides from an observation
// what may be removed (package cleanup), judges the evidence (package
// attest) and signs the reports. A driver does the runtime's I/O, one
// resource at a time, by exact id: it lays a plan out as the runtime's
// objects, creates, starts and awaits one, observes and removes one by the
// id the journal recorded, lists what carries a label, runs a command in a
// container, and reaches a workspace's episode server. It never decides
// ownership, never removes by name or label, never pulls an image and
// never writes the journal.
//
// What a runtime can and cannot do is declared (Capabilities), never
// tested for by name: the engine and the attestation choose by the
// declaration, as gVisor's platforms declare their requirements.
//
// A driver's errors are classified by kind, never by text: an absent
// resource wraps ErrNotFound, a name another resource holds ErrNameTaken,
// any other answer the runtime itself gave ErrRefused, and a runtime that
// did not answer at all ErrUnreachable. An error that wraps none of them is
// a call that ended without an answer (cancelled, cut): the runtime may
// still carry it out.
//
// Package adapter/drivertest is the conformance suite every driver passes
// against its real runtime.
package driver

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
)

// Kinds of error a driver returns, wrapped.
var (
	// ErrNotFound: the runtime answered that the resource (or image) does
	// not exist.
	ErrNotFound = errors.New("not found")
	// ErrNameTaken: a create was refused because another resource holds
	// the name. Definitive: the create made nothing.
	ErrNameTaken = errors.New("the name is taken")
	// ErrRefused: the runtime answered the call with an error of its own
	// (invalid, forbidden, failed): its answer is definitive.
	ErrRefused = errors.New("refused by the runtime")
	// ErrUnreachable: nobody answered (the daemon or API server stopped,
	// or its socket or address went away).
	ErrUnreachable = errors.New("runtime unreachable")
	// ErrNotReady: a container did not become ready before the deadline,
	// or stopped first.
	ErrNotReady = errors.New("not ready")
	// ErrHeld: a removal refused because the resource holds what is not
	// the campaign's (a cluster's namespace with another's pod in it):
	// definitive, the resource is left alone.
	ErrHeld = errors.New("the resource holds what is not the campaign's")
	// ErrExhausted: a pool the runtime's objects are allocated from
	// (subnets, uid blocks) has too few free.
	ErrExhausted = errors.New("daemon-wide pool exhausted")
	// ErrChanged: a removal's precondition failed: the resource is not as
	// it was observed (relabelled, replaced): observe it again.
	ErrChanged = errors.New("the resource changed since it was observed")
)

// Kind returns an error whose text is msg and that is kind (errors.Is):
// a driver's own words for one of the kinds above.
func Kind(msg string, kind error) error { return &kindError{msg, kind} }

type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// Answered reports whether err is the runtime's own answer to a call (an
// error it sent), as opposed to a call that ended without one, which the
// runtime may still carry out.
func Answered(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrNameTaken) || errors.Is(err, ErrRefused) || errors.Is(err, ErrChanged) || errors.Is(err, ErrHeld)
}

// Driver is a runtime that holds campaigns. Every method may be called
// concurrently. Open one with the driver's package (docker.Open); Close
// releases it.
type Driver interface {
	// Info is the runtime's identity and what the driver can do, read
	// when it was opened.
	Info() Info

	Images
	Resources
	Workspaces

	// Evidence reads what the runtime says of a campaign, for its
	// attestation: its identity, every resource of q by the id the
	// journal recorded, the images the plan pins and everything carrying
	// the campaign's label, each as the runtime answered. A missing answer
	// is missing evidence: it fails the checks that needed it.
	Evidence(ctx context.Context, q EvidenceQuery) evidence.Runtime

	// Close releases the driver's connections.
	Close() error
}

// Images is the runtime's local images. A driver never pulls.
type Images interface {
	// Resolve returns the id of the image ref names now on the runtime (a
	// reference that is an id already answers with itself). An image the
	// runtime does not hold wraps ErrNotFound, in words a launcher can act
	// on.
	Resolve(ctx context.Context, ref string) (string, error)
	// Images lists the runtime's local images a spec can name.
	Images(ctx context.Context) ([]api.Image, error)
}

// Resources is the runtime's side of custody: one resource at a time, by
// exact id.
type Resources interface {
	// Check refuses a plan the runtime cannot hold (a name or a label it
	// cannot carry, more workspaces than it takes), before anything is
	// made: a *campaign.ValidationError names the field.
	Check(p *campaign.Plan) error
	// Layout is what a bring-up (or a pool's refill) of b creates on this
	// runtime, in the order it must be made. It creates nothing.
	Layout(ctx context.Context, b BringUp) (*Layout, error)
	// Settings are the hardening, limits and DNS the driver's create calls
	// ask for, by role (campaign.RoleServer, campaign.RoleWork), for the
	// attestation to hold the runtime's answers to.
	Settings(p *campaign.Plan) map[string]attest.RoleSettings
	// Create makes one object of a layout, carrying o.Labels, and
	// returns its id. An error wrapping ErrNameTaken made nothing; any
	// other may have made it (the engine resolves it by name: Lookup).
	Create(ctx context.Context, o *Object) (string, error)
	// Start starts a layout's main object once it is made (and joins it to
	// what it needs of the objects made before it).
	Start(ctx context.Context, o *Object) error
	// Ready waits until a started main object answers as ready, until ctx
	// is done; it fails at once when the object stopped.
	Ready(ctx context.Context, o *Object) error
	// Exec runs cmd in the container with the given id (with
	// ExecOptions.Stdin and Stdout where Capabilities.StreamingExec).
	Exec(ctx context.Context, id string, cmd []string, opts ExecOptions) (ExecResult, error)
	// Observe asks the runtime about one journalled resource by its
	// recorded id. An answer that is not definitive is State Unknown.
	// Another resource that took the name since (a twin) is not the
	// journalled one: the journalled one is then Absent.
	Observe(ctx context.Context, r campaign.Resource) cleanup.Observation
	// Lookup finds the resource holding an intent's name, for resolving a
	// create whose answer was lost: its id and labels (the engine judges
	// them), or Absent when the runtime says there is none. instance is
	// the nonce of the intent's generation (a resource without labels may
	// be proven by its place). An error is no definitive answer.
	Lookup(ctx context.Context, r campaign.Resource, instance string) (Found, error)
	// Remove removes the journalled resource r by its exact id, seen as
	// observed (a runtime with preconditions removes only that version:
	// ErrChanged otherwise). A resource already gone wraps ErrNotFound.
	Remove(ctx context.Context, r campaign.Resource, seen cleanup.Observation) error
	// List lists every resource (in any state) carrying all the given
	// labels ("key=value", or "key" for any value). It is how the engine
	// looks for what it may have lost track of and proves nothing is
	// left; it never chooses what to remove.
	List(ctx context.Context, labels ...string) ([]cleanup.Found, error)
}

// Workspaces reaches a workspace's episode server: the workbench.
type Workspaces interface {
	// Workspace is the handle on the plan's workspace ag, from the
	// journalled resources of its generation (live ones): what the other
	// methods reach it by.
	Workspace(ag campaign.AgentPlan, live []campaign.Resource) (Workspace, error)
	// Dial connects to the workspace's episode server (HTTP over the
	// connection).
	Dial(ctx context.Context, w Workspace) (net.Conn, error)
	// Bind binds the workspace to task: every reset it serves is that
	// task's. Never where code the workbench does not sandbox could read
	// it; once bound, never bound again.
	Bind(ctx context.Context, w Workspace, task string) error
	// Activity is the last moment a workspace among a generation's live
	// resources served a reset or a step (zero when none can be read).
	Activity(ctx context.Context, live []campaign.Resource) time.Time
	// Results reads the workspace's episode results file (package
	// workbench/results) from offset: at most results.MaxFile bytes, nil
	// when there is no file yet, results.ErrShrunk when it is shorter than
	// offset. Its bytes are hostile: the engine parses them strictly.
	Results(ctx context.Context, w Workspace, offset int64) ([]byte, error)
}

// Info is what a driver says of its runtime and of itself.
type Info struct {
	// Name is the driver's name ("docker").
	Name string
	// Runtime is the runtime's identity as a bring-up records it (the
	// attestation proves a campaign is still on it). Its ID keys the
	// runtime-wide locks every agentpen on it shares.
	Runtime attest.DaemonRecord
	// Daemon is what the runtime said of itself when the driver was opened
	// (limits enforced, warnings), for doctor and the report.
	Daemon campaign.Daemon
	// SocketPath is the runtime's socket a server may have mounted
	// (server.mount_docker_socket), "" for none.
	SocketPath string
	// RunBase is where the runtime's workspaces keep their files on
	// agentpen's host, "" for none.
	RunBase string
	// Kinds are the kinds of resource the driver makes, in the order they
	// are removed (containers before what they stand on).
	Kinds []campaign.Kind
	Capabilities
}

// Capabilities are what a runtime can and cannot do, declared.
type Capabilities struct {
	// HostSockets: each workspace's episode server listens on a unix
	// socket on agentpen's host (Workspace.Socket).
	HostSockets bool
	// PrivilegedExec: Exec can run with every capability of the
	// container's user namespace (the process-custody probe reads /proc
	// of a non-dumpable server).
	PrivilegedExec bool
	// OwnUserNamespaces: every workspace runs in a user namespace of its
	// own; false: they share the runtime's (rootless Docker maps every
	// container alike), so uids must not collide between them.
	OwnUserNamespaces bool
	// BindAfterStart: a workspace can be bound only once its container
	// runs (by an exec: a cluster's pod has no host directory to write
	// before); the engine binds it right after its start. The workbench
	// refuses every reset until it is bound, so it serves nothing
	// meanwhile. False: bound before its container is made.
	BindAfterStart bool
	// StreamingExec: Exec feeds ExecOptions.Stdin to the command and
	// writes its output to ExecOptions.Stdout as it comes, so the engine
	// can talk to one process a line at a time (the attestation's probe
	// phases in one exec per container). False: Exec refuses them.
	StreamingExec bool
	// EnforcedNetworkPolicy: the runtime enforces the isolation the
	// layout asks for by its own means (Docker's internal networks); false
	// when policies are stored and only probes can prove them.
	EnforcedNetworkPolicy bool
	// Attestable: the attestation (package attest) judges this runtime's
	// campaigns, its checks read from the runtime's answers and its probes
	// run in the containers. False: a campaign on it cannot attest, so the
	// fail-closed bring-up (adapter.Up) refuses one before it makes
	// anything.
	Attestable bool
	// MaxWorkspaces is the most workspaces (pool included) a campaign may
	// have on this runtime; 0 is campaign.MaxWorkspaces.
	MaxWorkspaces int
	// Parallelism is how many creates, or removals, the runtime takes
	// best at once; 0 is the engine's default (a daemon's).
	Parallelism int
}

// BringUp is what the engine asks a driver to lay out.
type BringUp struct {
	// Plan is the campaign's plan, bound to its generation, its images
	// pinned and each workspace's uid block set.
	Plan *campaign.Plan
	// Agents are the indexes in Plan.Agents of the workspaces to lay out.
	Agents []int
	// Campaign: lay out the campaign's own objects too (its networks, the
	// grader); false for a pool's refill.
	Campaign bool
	// APIKey is the value of the server's api_key_env in agentpen's
	// environment ("" when unset), Secrets the values of its secret_env.
	// They go into the runtime's create calls only: never into an
	// object's name, labels or error, a log or the journal.
	APIKey  string
	Secrets map[string]string
	// Lock takes a lock shared by every agentpen on this runtime, by name,
	// for what the driver allocates (subnets); the func it returns
	// releases it.
	Lock func(ctx context.Context, name string) (func(), error)
}

// Layout is what one bring-up makes, in order.
type Layout struct {
	// Shared are the campaign's own objects, made first: stage after
	// stage, each stage's objects at once (a Docker campaign's networks,
	// then its grader's socket directory).
	Shared [][]*Object
	// Server is the grader's unit (nil for a refill); Workspaces are
	// BringUp.Agents', in that order.
	Server     *Unit
	Workspaces []*Unit
	// Done, when set, is called once, when the shared objects exist or
	// the bring-up failed (it releases what Layout holds: a lock).
	Done func()
}

// Unit is one container (or pod) and what it needs made first.
type Unit struct {
	// Agent is the workspace's index in Plan.Agents; -1 for the server.
	Agent int
	// Needs are made first, in order (a workspace's run directory).
	Needs []*Object
	// Main is the container: made, bound (a workspace), started, awaited.
	Main *Object
}

// Objects are the unit's objects in the order they are made.
func (u *Unit) Objects() []*Object {
	return append(append([]*Object(nil), u.Needs...), u.Main)
}

// Object is one resource of a layout.
type Object struct {
	// Kind, Role and Name are what the journal's intent records.
	Kind campaign.Kind
	Role string
	Name string
	// Labels are the ownership labels the resource carries (the engine
	// adds the create's secret before Create); nil for a resource without
	// labels.
	Labels map[string]string
	// ID is the runtime's id, set by the engine once Create answered.
	ID string
	// Spec is the driver's own description of it. The engine never reads
	// it; it may hold secret values and is never logged.
	Spec any
}

// Resource is the object as the journal records it.
func (o *Object) Resource(gen int) campaign.Resource {
	return campaign.Resource{Gen: gen, Kind: o.Kind, Role: o.Role, Name: o.Name, ID: o.ID, Labels: o.Labels}
}

// String names the object without its spec.
func (o *Object) String() string { return o.Role + " " + string(o.Kind) + " " + o.Name }

// Found is what a Lookup by name found.
type Found struct {
	// Absent: the runtime says no resource holds the name. Definite: that
	// cannot change (the kind is made synchronously), so no create of it
	// can still be in flight.
	Absent, Definite bool
	// ID and Labels are those of the resource holding the name.
	ID     string
	Labels map[string]string
	// Proven: a resource without labels whose place proves it is the
	// intent's (a directory under its generation's run root).
	Proven bool
	// Note says why, for the journal ("" for the engine's own words).
	Note string
}

// ExecOptions configure an Exec.
type ExecOptions struct {
	// Privileged runs with every capability of the container's user
	// namespace (Capabilities.PrivilegedExec; refused otherwise).
	Privileged bool
	// Stdin, when not nil, is the command's standard input, read until
	// its end (then the command reads its end) or until the command
	// exited; a Stdin that is an io.Closer is closed when the Exec
	// returns, so a read it blocks in ends. Stdout, when not nil,
	// receives the command's standard output as it comes (at most 1 MiB
	// with its standard error), and ExecResult.Stdout is then empty.
	// Both need Capabilities.StreamingExec.
	Stdin  io.Reader
	Stdout io.Writer
}

// ExecResult is what an Exec returned: its exit code and output (at most
// 1 MiB of the two together).
type ExecResult struct {
	ExitCode       int
	Stdout, Stderr string
}

// Workspace is a driver's handle on one workspace.
type Workspace struct {
	// AgentID is its opaque agent id, ID its container's id on the
	// runtime.
	AgentID string
	ID      string
	// Socket is its episode server's unix socket on agentpen's host
	// (Capabilities.HostSockets), "" otherwise.
	Socket string
	// Resources are its journalled resources: what the driver reaches it
	// by.
	Resources []campaign.Resource
}

// EvidenceQuery is what an attestation asks the runtime about.
type EvidenceQuery struct {
	CampaignID string
	// Resources are the campaign's journalled resources (those with an
	// id, not removed).
	Resources []campaign.Resource
	// Images are the image references the plan pins.
	Images []string
	// KeyEnv names the API key variable: its value in each container is
	// judged by KeyPolicy and dropped (evidence.Container.Key); every
	// other value is dropped unread.
	KeyEnv    string
	KeyPolicy apikey.Policy
}
