package config

import (
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// Version is the only configuration version this package reads.
const Version = 1

// Scaler types.
const (
	TypeBareMetal   = "bare-metal"
	TypeContainer   = "container"
	TypeFirecracker = "firecracker"
)

// Container runtimes a container scaler may ask for.
const (
	RuntimeAuto   = "auto"
	RuntimeDocker = "docker"
	RuntimePodman = "podman"
)

// Image pull policies of a container label set.
const (
	PullAlways       = "Always"
	PullIfNotPresent = "IfNotPresent"
	PullNever        = "Never"
)

// Defaults of the file and of a scaler entry.
const (
	DefaultGlobalMaxAgents     = scaler.DefaultGlobalMaxAgents
	DefaultMaxConcurrentSpawns = scaler.DefaultMaxConcurrentSpawns
	DefaultWarmPoolIdleTimeout = 300 * time.Second
	DefaultFailJobsAfter       = scaler.DefaultFailJobsAfter
)

// Upper bounds on counts and durations, so that a slip of the keyboard
// cannot ask the manager for a billion agents.
const (
	maxCount       = 100_000
	maxIdleTimeout = 7 * 24 * time.Hour
	maxCPUs        = 256
)

// File is a loaded configuration: the main file with its drop-ins merged.
// Every default is filled in, so the zero value of a field below means
// what its comment says, never "not given". Empty lists and maps are nil.
type File struct {
	// GlobalMaxAgents caps scaler agents across every scaler; default 50.
	GlobalMaxAgents int
	// Defaults is the file's defaults block.
	Defaults Defaults
	// Scalers are those of the main file, then those of each drop-in in
	// merge order.
	Scalers []Scaler
	// Firecracker is the top-level firecracker network block, with its
	// defaults when the file has none; every firecracker scaler shares it.
	Firecracker FirecrackerNetwork
}

// Defaults is the lowest layer of the resource cascade.
type Defaults struct {
	// Resources are the requests and limits of a label set that declares
	// none of its own, dimension by dimension.
	Resources Resources
}

// Resources is one layer of the resource cascade (defaults, label set),
// with the mirror rule applied: a layer that declares only requests has
// the same limits, and one that declares only limits has the same
// requests. A zero field is not declared by this layer.
type Resources struct {
	Requests scaler.Spec
	Limits   scaler.Spec
}

// Scaler is one scaler entry.
type Scaler struct {
	// Name is unique across the main file and the drop-ins and matches
	// ^[a-z0-9][a-z0-9-]{0,62}$.
	Name string
	// Type is TypeBareMetal, TypeContainer or TypeFirecracker.
	Type string
	// MaxAgents caps this scaler's agents, spawning or alive.
	MaxAgents int
	// MaxConcurrentSpawns bounds spawns in flight; default 8.
	MaxConcurrentSpawns int
	// OrchestratorURL is the ws:// or wss:// URL its agents dial; empty
	// means the orchestrator's own default.
	OrchestratorURL string
	// LabelSets are the kinds of agent the scaler spawns; at least one.
	LabelSets []LabelSet
	// MandatoryLabels are lower-cased, de-duplicated and sorted; each is
	// in every label set's Labels.
	MandatoryLabels []string
	WarmPool        WarmPool
	// ResourceCap caps the sum of this scaler's requests; zero fields mean
	// no cap on that dimension.
	ResourceCap ResourceCap
	// FailJobsAfter is how many failed spawns in a row (refused launches,
	// agents that died before registering) fail the jobs waiting for this
	// scaler with the cause; default 3, 0 means they wait out the queue
	// timeout.
	FailJobsAfter int
	// Container holds the container-only options; zero for the others.
	Container Container
	// Firecracker holds the firecracker-only options, defaults filled in;
	// zero for the others.
	Firecracker Firecracker
}

// LabelSet is one kind of agent a scaler spawns.
type LabelSet struct {
	// Labels are lower-cased, de-duplicated and sorted; at least one.
	Labels []string
	// Image is the container image (container scalers, required there).
	Image string
	// ImagePullPolicy is PullAlways, PullIfNotPresent or PullNever for a
	// container scaler (default PullIfNotPresent); empty for bare-metal.
	ImagePullPolicy string
	// BinaryPath is the absolute path of kici-agent (bare-metal, required
	// there). Whether it exists is checked when an agent is spawned.
	BinaryPath string
	// Env is added to the agent's environment last.
	Env map[string]string
	// Volumes are bind specs "/host:/container[:options]" (container).
	Volumes []string
	// Resources is this label set's own layer of the cascade; see
	// (*File).ManagerConfig for the resolved values.
	Resources Resources
	// Firecracker holds a firecracker label set's options (rootfsPath is
	// required there; the overlay size defaults to 2048 MiB); zero for the
	// other types.
	Firecracker FirecrackerLabelSet
}

// Key is the label set's normalised key, the one overlap is checked on.
func (ls LabelSet) Key() string { return scaler.LabelKey(ls.Labels) }

// WarmPool keeps idle agents ready for each of a scaler's label sets.
type WarmPool struct {
	Enabled bool
	// Size is the number of idle agents to keep per label set.
	Size int
	// IdleTimeout is how long a surplus idle agent lives; default 300 s.
	IdleTimeout time.Duration
}

// ResourceCap caps the sum of the requests of a scaler's agents.
type ResourceCap struct {
	// MaxCPUs is in CPUs; 0 means no cap.
	MaxCPUs float64
	// MaxMemoryBytes is in bytes; 0 means no cap.
	MaxMemoryBytes int64
}

// Container holds the options of a container scaler.
type Container struct {
	// Host is a remote daemon's tcp:// URL; empty means a local socket.
	Host string
	// SocketPath is the local daemon socket; empty means probe the usual
	// places.
	SocketPath string
	// Runtime is RuntimeAuto (default), RuntimeDocker or RuntimePodman.
	Runtime string
	// ExtraHosts are "host:address" entries added to /etc/hosts; address is
	// an IP literal or "host-gateway".
	ExtraHosts []string
	// NetworkIsolation is always false: isolation rules are not
	// implemented yet, and the loader rejects true.
	NetworkIsolation bool
}
