package firecracker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/fcapi"
)

// Type is the backend type, as scaler configs name it.
const Type = "firecracker"

// Defaults of the Config fields whose zero value means "default".
const (
	DefaultSocketWait = 30 * time.Second
	DefaultStopGrace  = 5 * time.Second
	DefaultVCPUCount  = 2
	DefaultMemSizeMib = 512
	// DefaultOverlayMiB sizes the overlay of a label set that says nothing.
	DefaultOverlayMiB = 2048
)

// ErrClosed is returned by Spawn after Close.
var ErrClosed = errors.New("firecracker backend closed")

// errDestroyed is the cause a Destroy gives a spawn still in progress.
var errDestroyed = errors.New("agent destroyed while spawning")

// Config configures one firecracker scaler's backend.
type Config struct {
	// Name is the scaler's name.
	Name string
	// Host is the process's shared host side. Required.
	Host *Host
	// FirecrackerPath, JailerPath and KernelPath are absolute; whether
	// they exist is checked at each spawn.
	FirecrackerPath string
	JailerPath      string
	KernelPath      string
	// UID and GID are what the jailer drops the VMM to; not 0.
	UID, GID int
	// ChrootBaseDir is the jailer's chroot base, absolute.
	ChrootBaseDir string
	// VCPUCount and MemSizeMib size a VM nothing else sizes; 0 means 2
	// and 512.
	VCPUCount  int
	MemSizeMib int
	// SocketWait bounds the wait for the VMM's API socket; 0 means 30 s.
	SocketWait time.Duration
	// StopGrace is how long a guest asked to stop (SendCtrlAltDel) gets
	// before its VMM is killed; 0 means 5 s.
	StopGrace time.Duration
	// TemplateWait bounds the wait for a warm-start template VM's agent to
	// be ready for its snapshot; 0 means 60 s.
	TemplateWait time.Duration
	// MinFreeBytes is the free space the chroot volume must have for a
	// spawn; 0 means 1 GiB, negative turns the check off (tests).
	MinFreeBytes int64
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Host == nil:
		return errors.New("firecracker config: Host is required")
	case c.Name == "":
		return errors.New("firecracker config: Name is required")
	case !filepath.IsAbs(c.FirecrackerPath) || !filepath.IsAbs(c.JailerPath) || !filepath.IsAbs(c.KernelPath):
		return errors.New("firecracker config: FirecrackerPath, JailerPath and KernelPath must be absolute paths")
	case !filepath.IsAbs(c.ChrootBaseDir):
		return fmt.Errorf("firecracker config: ChrootBaseDir %q is not an absolute path", c.ChrootBaseDir)
	case c.UID <= 0 || c.GID <= 0:
		return fmt.Errorf("firecracker config: UID %d and GID %d must be unprivileged (> 0)", c.UID, c.GID)
	case c.VCPUCount < 0 || c.MemSizeMib < 0 || c.SocketWait < 0 || c.StopGrace < 0 || c.TemplateWait < 0:
		return errors.New("firecracker config: VCPUCount, MemSizeMib, SocketWait, StopGrace and TemplateWait may not be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.VCPUCount == 0 {
		c.VCPUCount = DefaultVCPUCount
	}
	if c.MemSizeMib == 0 {
		c.MemSizeMib = DefaultMemSizeMib
	}
	if c.SocketWait == 0 {
		c.SocketWait = DefaultSocketWait
	}
	if c.StopGrace == 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.TemplateWait == 0 {
		c.TemplateWait = DefaultTemplateWait
	}
	if c.MinFreeBytes == 0 {
		c.MinFreeBytes = MinFreeBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

var (
	_ scaler.Backend   = (*Backend)(nil)
	_ scaler.Registrar = (*Backend)(nil)
	_ scaler.Reaper    = (*Backend)(nil)
)

// Backend runs agents in Firecracker microVMs. Build it with New.
type Backend struct {
	log  *slog.Logger
	cfg  Config
	host *Host

	mu     sync.Mutex
	vms    map[string]*vm // tracked VMs, by agent id
	closed bool
	// wg counts the goroutines watching VMs; spawns the Spawns in
	// progress.
	wg     sync.WaitGroup
	spawns sync.WaitGroup
	// warm is the warm-start snapshots' state; bg, cancelled by Close, is
	// the context of their builds.
	warm   warmState
	bg     context.Context
	bgStop context.CancelFunc
	// timed, when set (benchmarks), receives how long each teardown spent
	// stopping the VMM and removing its host resources.
	timed func(stop, remove time.Duration)
}

// vm is one tracked microVM. The fields after the mutex-guarded mark are
// guarded by Backend.mu; the others are set before the vm is shared.
type vm struct {
	id      string
	onEvent func(scaler.Event)
	dir     string // <base>/firecracker/<id>
	root    string // dir/root, the jail
	tap     string
	abort   context.CancelCauseFunc // cancels a Spawn in progress
	// spawnDone is closed when Spawn returned (closed already for a
	// recovered VM).
	spawnDone chan struct{}

	// guarded by Backend.mu:
	addr       netip.Addr // valid once leased
	pid        int        // the VMM's, once read from the pid file
	api        *fcapi.Client
	sock       *apiSock // api's socket; closed at teardown
	registered bool
	destroyed  bool
	// torn is closed once the host resources are gone.
	torn     chan struct{}
	tornOnce sync.Once
}

// New checks cfg and returns the backend. Nothing on the host is touched.
func New(log *slog.Logger, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	b := &Backend{
		log:  log.With("backend", Type, "scaler", cfg.Name),
		cfg:  cfg,
		host: cfg.Host,
		vms:  map[string]*vm{},
	}
	b.bg, b.bgStop = context.WithCancel(context.Background())
	return b, nil
}

// Type returns "firecracker".
func (b *Backend) Type() string { return Type }

// Capabilities: VMs are re-attached after a restart and listed from their
// chroots.
func (b *Backend) Capabilities() scaler.Capabilities {
	return scaler.Capabilities{Recoverable: true, ListsCompute: true}
}

// MarkRegistered records that the agent registered (its VM's exit is a
// disconnect from now on) and empties the VM's MMDS, so that job code in
// the guest cannot read the agent's token there.
func (b *Backend) MarkRegistered(agentID string) {
	b.mu.Lock()
	v := b.vms[agentID]
	var api *fcapi.Client
	if v != nil {
		v.registered = true
		api = v.api
	}
	b.mu.Unlock()
	if api == nil {
		return
	}
	b.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		empty := map[string]any{"latest": map[string]any{"meta-data": map[string]any{}}}
		if err := api.PutMMDS(ctx, empty); err != nil {
			b.log.Warn("clear MMDS after registration", "agent_id", agentID, "error", err)
		}
	})
}

// Close destroys every tracked VM and waits for the goroutines that watch
// them. Spawn fails with ErrClosed afterwards.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	ids := make([]string, 0, len(b.vms))
	for id := range b.vms {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	b.bgStop()
	err := scaler.DestroyAll(ctx, b, ids)
	b.spawns.Wait()
	b.wg.Wait()
	return err
}

// emit sends an event to the spawn's OnEvent, if it has one.
func (b *Backend) emit(v *vm, typ, detail string) {
	if v.onEvent == nil {
		return
	}
	v.onEvent(scaler.Event{AgentID: v.id, Type: typ, Detail: detail, Time: b.cfg.Now()})
}

// vmDir is the directory of a VM: its jail and its logs.
func (b *Backend) vmDir(id string) string { return filepath.Join(vmsDir(b.cfg.ChrootBaseDir), id) }

var _ scaler.OrphanStopper = (*Backend)(nil)
