package fakevm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"time"
)

// Version is the Firecracker version the fake reports (GET /, GET
// /version, --version).
const Version = "1.13.1"

// defaultInstanceID is Firecracker's id when --id is not given.
const defaultInstanceID = "anonymous-instance"

// Instance states, as GET / reports them.
const (
	stateNotStarted = "Not started"
	stateRunning    = "Running"
	statePaused     = "Paused"
)

// Faults Firecracker answers for a call in the wrong phase.
const (
	msgPostBoot = "The requested operation is not supported after starting the microVM."
	msgPreBoot  = "The requested operation is not supported before starting the microVM."
)

// Exit codes of the VMM process (Firecracker's FcExitCode).
const (
	ExitOK               = 0
	ExitGenericError     = 1
	ExitBadConfiguration = 152
	ExitArgParsing       = 153
)

// apiFault is a refused API call: its status (400, or 413 for a too large
// MMDS document) and the fault_message of the answer. The fault texts of
// the fake are Firecracker's own where they are known, capitalised and
// punctuated as Firecracker writes them, so that they read (and match) the
// same; the fake's own refusals say "fake firecracker".
type apiFault struct {
	status int
	msg    string
}

func (f *apiFault) Error() string { return f.msg }

// fault returns a 400 apiFault.
func fault(format string, args ...any) *apiFault {
	return &apiFault{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// Tap is the host side of a network interface: one Ethernet frame per Read
// and per Write (a TAP opened with IFF_TAP|IFF_NO_PI).
type Tap = io.ReadWriteCloser

// Guest is a booted fake guest: the processes that stand in for the VM's
// software. Its methods are safe for concurrent use.
type Guest interface {
	// Pause stops the guest's processes and Resume continues them.
	Pause() error
	Resume() error
	// CtrlAltDel asks the guest to shut down: its processes get SIGTERM,
	// then SIGKILL after a grace period.
	CtrlAltDel() error
	// Done is closed when the guest has powered off.
	Done() <-chan struct{}
}

// GuestBooter boots the guest of a Machine. ctx bounds the boot only, not
// the guest's life.
type GuestBooter interface {
	BootGuest(ctx context.Context, spec GuestSpec) (Guest, error)
}

// GuestSpec is what a guest boots with.
type GuestSpec struct {
	// ID is the instance id.
	ID string
	// NICs are the network interfaces in the order they were configured:
	// the guest names them eth0, eth1, ...
	NICs []GuestNIC
	// IP is the ip= boot argument's configuration; nil when there is none.
	IP *IPConfig
	// MMDSAddr is the MMDS address and MMDS the server of the guest
	// endpoint to Serve on a listener there; MMDS is nil when MMDS is not
	// configured.
	MMDSAddr netip.Addr
	MMDS     *http.Server
}

// GuestNIC is one network interface of a guest.
type GuestNIC struct {
	IfaceID  string
	GuestMAC string
	// MTU is the interface's mtu; 0 leaves the guest's default.
	MTU int
	// Tap is the opened host TAP; the guest relays its frames.
	Tap Tap
}

// Config configures a Machine.
type Config struct {
	// ID is the instance id; empty means "anonymous-instance".
	ID string
	// Root is the directory the paths of API calls (kernel, drives, log,
	// snapshot files) are resolved in; empty means "/" (the VMM is
	// chrooted into its jail).
	Root string
	// PayloadLimit bounds an API request body, in bytes; 0 means 51200.
	PayloadLimit int
	// MMDSSizeLimit bounds the MMDS data store, in bytes; 0 means
	// PayloadLimit.
	MMDSSizeLimit int
	// OpenTap opens a host TAP by name; nil opens it through /dev/net/tun.
	OpenTap func(name string) (Tap, error)
	// Guest boots the guest at InstanceStart; nil makes InstanceStart
	// fail (the VMM did not start as root and has no guest helper).
	Guest GuestBooter
	// LogOutput receives the VMM's log lines; nil discards them until PUT
	// /logger names a file. LogLevel is the initial level.
	LogOutput io.Writer
	LogLevel  slog.Level
	// Now is the clock of MMDS tokens; nil means time.Now.
	Now func() time.Time
}

// Machine is the fake VMM's state behind the Firecracker API. Its state
// machine is the real one's:
//
//	              InstanceStart                   PATCH /vm Paused
//	Not started ---------------> Running <-----------------------> Paused
//	     |                          |        PATCH /vm Resumed       ^
//	     | PUT /snapshot/load       | guest powers off               |
//	     +--------------------------|--------------------------------+
//	       (resume_vm: to Running)  v                 (boots the guest
//	                               off (Done closes)   at the first resume)
//
// Pre-boot calls (configuration, InstanceStart, snapshot load) are refused
// with 400 once the VM left "Not started"; post-boot calls (pause, resume,
// snapshot create, SendCtrlAltDel, FlushMetrics, PATCH of drives and
// interfaces) are refused before. Calls are serialised, as Firecracker's
// API thread serialises them. A *Machine is safe for concurrent use.
type Machine struct {
	cfg   Config
	store *mmdsStore
	logw  *swapWriter
	level *slog.LevelVar
	log   *slog.Logger

	done     chan struct{}
	doneOnce sync.Once
	exitCode int // set once, before done closes

	mu           sync.Mutex
	state        string
	bootPath     bool // a boot-specific resource was configured
	restored     bool // loaded from a snapshot
	mmdsCreated  bool
	machine      machineState
	boot         *bootState
	drives       []driveState // the root drive first
	nics         []*nic
	mmdsCfg      *mmdsState
	loggerSet    bool
	metrics      io.WriteCloser
	guest        Guest
	pendingCAD   bool       // SendCtrlAltDel while paused
	restoredBoot *bootState // the boot source a snapshot carried
}

// nic is a configured network interface and its opened TAP.
type nic struct {
	netState
	tap Tap
}

// NewMachine returns a machine in state "Not started".
func NewMachine(cfg Config) *Machine {
	if cfg.ID == "" {
		cfg.ID = defaultInstanceID
	}
	if cfg.PayloadLimit <= 0 {
		cfg.PayloadLimit = DefaultMMDSSizeLimit
	}
	if cfg.MMDSSizeLimit <= 0 {
		cfg.MMDSSizeLimit = cfg.PayloadLimit
	}
	if cfg.OpenTap == nil {
		cfg.OpenTap = openHostTap
	}
	m := &Machine{
		cfg:     cfg,
		store:   newMMDSStore(cfg.MMDSSizeLimit, cfg.Now),
		logw:    &swapWriter{w: cfg.LogOutput},
		level:   new(slog.LevelVar),
		done:    make(chan struct{}),
		state:   stateNotStarted,
		machine: machineState{VCPUCount: 1, MemSizeMib: 128, HugePages: "None"},
	}
	m.level.Set(cfg.LogLevel)
	m.log = slog.New(slog.NewTextHandler(m.logw, &slog.HandlerOptions{Level: m.level})).With("instance", cfg.ID)
	return m
}

// Logger returns the machine's logger (the VMM's log file).
func (m *Machine) Logger() *slog.Logger { return m.log }

// Done is closed when the machine ended: its guest powered off, or a
// snapshot load failed (which ends a Firecracker process).
func (m *Machine) Done() <-chan struct{} { return m.done }

// ExitCode is the VMM's exit code once Done is closed: 0 after a power-off,
// 1 after a failed snapshot load.
func (m *Machine) ExitCode() int {
	<-m.done
	return m.exitCode
}

// end closes done with code, once.
func (m *Machine) end(code int) {
	m.doneOnce.Do(func() {
		m.exitCode = code
		close(m.done)
	})
}

// Close releases the machine's TAPs and metrics file.
func (m *Machine) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, n := range m.nics {
		if n.tap != nil {
			errs = append(errs, n.tap.Close())
			n.tap = nil
		}
	}
	if m.metrics != nil {
		errs = append(errs, m.metrics.Close())
		m.metrics = nil
	}
	return errors.Join(errs...)
}

// resolve turns an API path into a path of this process.
func (m *Machine) resolve(p string) string {
	if m.cfg.Root == "" {
		return p
	}
	return filepath.Join(m.cfg.Root, p)
}

// describe is GET /.
func (m *Machine) describe() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return map[string]string{"id": m.cfg.ID, "state": m.state, "vmm_version": Version, "app_name": "Firecracker"}
}

// start is InstanceStart.
func (m *Machine) start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	if m.boot == nil {
		return fault("Start microvm error: Cannot start microvm without kernel configuration.")
	}
	if len(m.drives) == 0 || !m.drives[0].IsRootDevice {
		return fault("Start microvm error: fake firecracker: no root block device is configured (the fake boots only from a root drive).")
	}
	if err := m.bootGuestLocked(ctx, m.boot); err != nil {
		return fault("Start microvm error: %v", err)
	}
	m.state = stateRunning
	m.log.Info("the guest booted", "vcpu_count", m.machine.VCPUCount, "mem_size_mib", m.machine.MemSizeMib)
	return nil
}

// bootGuestLocked boots the guest with boot's command line and watches it.
func (m *Machine) bootGuestLocked(ctx context.Context, boot *bootState) error {
	if m.cfg.Guest == nil {
		return errors.New("fake firecracker: no guest helper (the fake must start as root to make the guest's network namespace)")
	}
	ip, err := parseIPArg(boot.BootArgs)
	if err != nil {
		return fmt.Errorf("Invalid kernel command line: %w", err)
	}
	spec := GuestSpec{ID: m.cfg.ID, IP: ip}
	for _, n := range m.nics {
		spec.NICs = append(spec.NICs, GuestNIC{IfaceID: n.IfaceID, GuestMAC: n.GuestMAC, MTU: n.MTU, Tap: n.tap})
	}
	if m.mmdsCfg != nil {
		spec.MMDSAddr = m.mmdsCfg.IPv4Address
		spec.MMDS = newMMDSServer(m.store)
	}
	g, err := m.cfg.Guest.BootGuest(ctx, spec)
	if err != nil {
		return err
	}
	m.guest = g
	go func() {
		<-g.Done()
		m.log.Info("the guest powered off")
		m.end(ExitOK)
	}()
	return nil
}

// ctrlAltDel is SendCtrlAltDel.
func (m *Machine) ctrlAltDel() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == stateNotStarted {
		return fault(msgPreBoot)
	}
	if m.state == statePaused {
		// A paused guest sees the key press once it runs again.
		m.pendingCAD = true
		return nil
	}
	if err := m.guest.CtrlAltDel(); err != nil {
		return fault("Internal VMM error: %v", err)
	}
	return nil
}

// flushMetrics is FlushMetrics.
func (m *Machine) flushMetrics() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == stateNotStarted {
		return fault(msgPreBoot)
	}
	if m.metrics == nil {
		return nil
	}
	line := fmt.Sprintf("{\"utc_timestamp_ms\":%d,\"fake_firecracker\":{\"state\":%q}}\n", time.Now().UnixMilli(), m.state)
	if _, err := io.WriteString(m.metrics, line); err != nil {
		return fault("Internal VMM error: write metrics: %v", err)
	}
	return nil
}

// setVMState is PATCH /vm.
func (m *Machine) setVMState(ctx context.Context, want string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == stateNotStarted {
		return fault(msgPreBoot)
	}
	switch want {
	case "Paused":
		if m.state == stateRunning {
			if err := m.guest.Pause(); err != nil {
				return fault("Internal VMM error: pause the guest: %v", err)
			}
		}
		m.state = statePaused
	case "Resumed":
		if m.state != statePaused {
			return nil
		}
		if m.guest == nil {
			// Restored from a snapshot: the fake cannot resume process
			// memory, so the guest boots fresh from the snapshot's config.
			if err := m.bootGuestLocked(ctx, m.restoredBoot); err != nil {
				return fault("Internal VMM error: resume the restored guest: %v", err)
			}
		} else if err := m.guest.Resume(); err != nil {
			return fault("Internal VMM error: resume the guest: %v", err)
		}
		m.state = stateRunning
		if m.pendingCAD {
			m.pendingCAD = false
			if err := m.guest.CtrlAltDel(); err != nil {
				return fault("Internal VMM error: %v", err)
			}
		}
	}
	return nil
}

// swapWriter is an io.Writer whose target PUT /logger may change.
type swapWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *swapWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}

func (s *swapWriter) set(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
}
