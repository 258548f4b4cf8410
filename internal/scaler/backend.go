package scaler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Event types, in the order a spawn emits them. They are the names that
// appear on a job's timeline and in its provisioning log.
const (
	// EventProvisioning: work started (pulling an image, creating a
	// container, starting a process).
	EventProvisioning = "scaler.provisioning"
	// EventNetwork: the compute's network is being set up.
	EventNetwork = "scaler.network"
	// EventReady: the compute runs (container started, process PID known).
	EventReady = "scaler.ready"
	// EventConnecting: the spawn is done; waiting for the agent to register.
	EventConnecting = "agent.connecting"
	// EventFailed: the spawn failed, or the agent died before registering;
	// Detail holds the error and the last lines of the agent's output.
	EventFailed = "scaler.failed"
)

// Event is one step of a spawn.
type Event struct {
	AgentID string
	Type    string
	Detail  string
	Time    time.Time
}

// Spec is an amount of compute. A zero field means "not declared".
type Spec struct {
	CPUs        float64
	MemoryBytes int64
}

// LabelSet is one kind of agent a scaler can spawn.
type LabelSet struct {
	// Labels are the declared labels, lower-cased, de-duplicated, sorted.
	Labels []string
	// Image is the container image (container backend).
	Image string
	// PullPolicy is Always, IfNotPresent (default) or Never.
	PullPolicy string
	// BinaryPath is the kici-agent executable (bare-metal backend).
	BinaryPath string
	// Env is added to the agent's environment last, so it wins.
	Env map[string]string
	// Volumes are bind specs "host:container[:ro]" (container backend).
	Volumes []string
	// Requests feed the capacity caps; Limits are enforced by the backend.
	Requests Spec
	Limits   Spec
	// Firecracker holds a firecracker label set's guest (zero for the
	// other backends).
	Firecracker FirecrackerGuest
}

// FirecrackerGuest is what a firecracker label set boots.
type FirecrackerGuest struct {
	// RootfsPath is the guest's root filesystem (ext4), attached
	// read-only.
	RootfsPath string
	// KernelPath, VCPUCount and MemSizeMib override the scaler's; zero
	// means the scaler's.
	KernelPath string
	VCPUCount  int
	MemSizeMib int
	// OverlayDriveSizeMib is the writable overlay drive's size.
	OverlayDriveSizeMib int
	// WarmStart serves the label set's spawns by restoring a snapshot of a
	// VM whose agent started and waits for an identity.
	WarmStart bool
}

// Key is the normalised form of a label set: its labels joined by ",".
func (ls LabelSet) Key() string { return LabelKey(ls.Labels) }

// SpawnRequest is everything a backend needs to start one agent.
type SpawnRequest struct {
	// AgentID is the new agent's id ("scaler-<type>-<8 hex>").
	AgentID string
	// Scaler is the name of the scaler spawning it.
	Scaler   string
	LabelSet LabelSet
	// Env is the agent's kici environment: KICI_ORCHESTRATOR_URL,
	// KICI_AGENT_ID, KICI_AGENT_TOKEN (single-use, job-scoped), KICI_LABELS,
	// KICI_AGENT_ONE_SHOT=1, KICI_AGENT_SCALER=1. The backend adds it to
	// the agent's environment before LabelSet.Env.
	Env map[string]string
	// Limits are the effective limits (zero fields: use the label set's).
	Limits Spec
	// BoundJobID and RunID name the job the agent is spawned for; empty
	// for a warm-pool agent.
	BoundJobID string
	RunID      string
	// OnEvent receives the spawn's events. It never blocks for long and
	// may be called after Spawn returned (EventFailed for an agent that
	// dies before registering).
	OnEvent func(Event)
}

// Handle identifies spawned compute. Blob is the backend's own record
// (versioned, opaque to the manager), saved in the store so that after a
// restart Recover can re-attach to the compute or report it gone.
type Handle struct {
	AgentID   string
	Scaler    string
	Ref       string // container id, PID, ...
	Blob      []byte
	SpawnedAt time.Time
}

// Compute is one piece of live compute a backend can see, for orphan
// listing.
type Compute struct {
	AgentID string
	Ref     string
	// Instance is the orchestrator instance that owns it, when known.
	Instance string
	Started  time.Time
	// Unverified is set when the backend sees the compute run but cannot
	// confirm it is its own (a PID whose process identity does not
	// match, say): it is listed, and never stopped as an orphan.
	Unverified bool
	// Tracked: the backend itself tracks it (a VM it spawned or
	// re-attached), whatever the manager knows.
	Tracked bool
}

// Capabilities says what a backend can do beyond the required methods.
type Capabilities struct {
	// Recoverable: Recover can re-attach compute after a restart.
	Recoverable bool
	// ListsCompute: List returns the backend's live compute (orphans).
	ListsCompute bool
}

// Backend starts and stops agents on one kind of compute. The manager
// calls it as follows:
//
//	Spawn ─► (agent registers) ─► MarkRegistered (optional interface)
//	      └─► Destroy  (when the agent disconnects, its job ends, the spawn
//	                    failed, or the scaler is removed)
//	Recover (once, after a restart, with the handles saved before it)
//	List    (orphan listing; StopOrphan of OrphanStopper stops one)
//	Close   (shutdown or scaler removal, after every Destroy)
//
// Spawn, Destroy, List and Recover may run concurrently, for different
// agents. Spawn returns once the compute runs, not when the agent has
// registered; if it fails it must leave nothing behind (Destroy of the
// same id is still called and must then be a no-op). A cancelled ctx
// aborts a Spawn in progress: the backend unwinds what it created and
// returns ctx's error. Destroy on an unknown or already-destroyed id
// returns nil, and Destroy must work whatever state a failed Spawn left.
type Backend interface {
	// Type is the backend type: "bare-metal", "container", "fake".
	Type() string
	Capabilities() Capabilities
	Spawn(ctx context.Context, req SpawnRequest) (Handle, error)
	Destroy(ctx context.Context, agentID string) error
	// Recover is given the handles saved for this scaler before a restart
	// and returns those whose compute still runs (re-attached); the rest
	// is gone or was reaped.
	Recover(ctx context.Context, handles []Handle) ([]Handle, error)
	// List returns the live compute this backend's scaler owns on this
	// orchestrator instance (or nil without ListsCompute).
	List(ctx context.Context) ([]Compute, error)
	Close(ctx context.Context) error
}

// Registrar is implemented by backends that care when their agent
// registers (after which an exit is a disconnect, not a failed spawn).
type Registrar interface {
	MarkRegistered(agentID string)
}

// DeterministicSpawnError is a spawn the host refused outright (a binary
// that does not exist, an image that is not there): retrying at once would
// fail the same way, so the manager defers the scaler instead of freeing
// its capacity for an instant retry.
type DeterministicSpawnError struct {
	Err error
}

func (e *DeterministicSpawnError) Error() string {
	return "spawn refused by the host: " + e.Err.Error()
}
func (e *DeterministicSpawnError) Unwrap() error { return e.Err }

// IsDeterministic reports whether err means the host refused the spawn.
func IsDeterministic(err error) bool {
	var d *DeterministicSpawnError
	return errors.As(err, &d)
}

// Refused wraps err as a DeterministicSpawnError.
func Refused(format string, args ...any) error {
	return &DeterministicSpawnError{Err: fmt.Errorf(format, args...)}
}

// HostCheck is one prerequisite of a backend on this host, as `kici-admin
// scaler status` and `diagnose` show it.
type HostCheck struct {
	// Name says what was checked, e.g. "kvm" or "rootfs fc,linux".
	Name string `json:"name"`
	// Status is "pass", "warn" (missing, but spawns go on) or "fail" (a
	// spawn would be refused for it).
	Status string `json:"status"`
	// Detail says what was found; Fix what to do about it.
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// HostChecker is implemented by backends whose host may lack what a spawn
// needs (devices, binaries, files). HostChecks changes nothing; sets are
// the scaler's label sets.
type HostChecker interface {
	HostChecks(sets []LabelSet) []HostCheck
}

// DestroyAll destroys the agents ids through b, all at once (each may take
// its stop grace), and joins the errors: what a backend's Close does with
// the agents it still tracks.
func DestroyAll(ctx context.Context, b Backend, ids []string) error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = b.Destroy(ctx, id) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
