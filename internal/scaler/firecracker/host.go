package firecracker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"

	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	"github.com/kici-dev/kici/internal/scaler/firecracker/overlay"
)

// HostConfig configures the host side shared by every firecracker scaler
// of a process.
type HostConfig struct {
	// Network is the bridge, its gateway, the address pool and the
	// nftables table.
	Network hostnet.Config
	// Netmask is the guests' netmask, the pool's.
	Netmask netip.Addr
	// AutoProvision creates what is missing of the bridge and its rules at
	// Prepare; false only verifies.
	AutoProvision bool
	// Addresses leases the pool's addresses. Required.
	Addresses Addresses
}

// Host is the host side shared by every firecracker backend of a process.
// It is safe for concurrent use.
type Host struct {
	log   *slog.Logger
	cfg   HostConfig
	net   *hostnet.Host
	addrs Addresses

	// reclaim is held shared by spawns while they create host resources
	// and exclusively by sweeps and operator stops, so that no sweep ever
	// sees a spawn half made.
	reclaim sync.RWMutex

	mu sync.Mutex
	// tracked holds every VM some backend of this process tracks, by id,
	// with its scaler's name; every sweep spares them.
	tracked   map[string]string
	templates map[string]*overlay.Templates // by chroot base dir
	// hostPorts are the host's TCP ports open to guests.
	hostPorts []uint16
	// prepared is the outcome of the last Prepare (nil before the first).
	prepared error
	ready    bool
}

// NewHost checks cfg and returns the Host; nothing on the host changes
// until Prepare.
func NewHost(log *slog.Logger, cfg HostConfig) (*Host, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Addresses == nil {
		return nil, errors.New("firecracker host: Addresses is required")
	}
	n, err := hostnet.New(cfg.Network)
	if err != nil {
		return nil, err
	}
	return &Host{
		log: log.With("bridge", cfg.Network.Bridge), cfg: cfg, net: n, addrs: cfg.Addresses,
		tracked: map[string]string{}, templates: map[string]*overlay.Templates{},
		hostPorts: slices.Clone(cfg.Network.HostPorts),
	}, nil
}

// Prepare makes the bridge, its address, the nftables table with its
// baseline and checks that the kernel can isolate bridge ports (with
// AutoProvision), or only verifies them. A failure is kept and reported
// by Ready and every spawn, so the scalers stay configured and a fixed
// host is picked up by the next Prepare.
func (h *Host) Prepare(ctx context.Context) error {
	err := h.prepare(ctx)
	h.mu.Lock()
	h.prepared, h.ready = err, err == nil
	h.mu.Unlock()
	if err != nil {
		h.log.Warn("firecracker host network not ready; spawns are refused until it is", "error", err)
	}
	return err
}

func (h *Host) prepare(ctx context.Context) error {
	if h.cfg.AutoProvision {
		if err := h.net.EnsureBridge(ctx); err != nil {
			return err
		}
		if err := h.net.EnsureFirewall(ctx); err != nil {
			return err
		}
		if err := h.net.ProbeIsolation(ctx); err != nil {
			return fmt.Errorf("bridge port isolation, the only boundary between VMs on the bridge: %w", err)
		}
	}
	if problems := h.net.Verify(ctx); len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = fmt.Errorf("%s", p)
		}
		return errors.Join(errs...)
	}
	return nil
}

// Ready returns nil when the last Prepare succeeded, else its error.
func (h *Host) Ready() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ready {
		return nil
	}
	if h.prepared == nil {
		return errors.New("the firecracker host network was not prepared")
	}
	return h.prepared
}

// Templates returns the overlay templates of a chroot base dir.
func (h *Host) Templates(chrootBaseDir string) (*overlay.Templates, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.templates[chrootBaseDir]; t != nil {
		return t, nil
	}
	t, err := overlay.New(h.log, overlay.Config{Dir: overlay.TemplateDir(chrootBaseDir)})
	if err != nil {
		return nil, err
	}
	h.templates[chrootBaseDir] = t
	return t, nil
}

// track records that scaler's backend tracks vmID; untrack forgets it.
func (h *Host) track(vmID, scaler string) {
	h.mu.Lock()
	h.tracked[vmID] = scaler
	h.mu.Unlock()
}

func (h *Host) untrack(vmID string) {
	h.mu.Lock()
	delete(h.tracked, vmID)
	h.mu.Unlock()
}

// isTracked reports whether some backend of this process tracks vmID.
func (h *Host) isTracked(vmID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.tracked[vmID]
	return ok
}

// OpenHostPort lets guests reach a TCP port of the host itself (an
// orchestrator listening there); every other connection from the bridge
// to the host is refused. The bridge's rules are rewritten, the VMs'
// kept.
func (h *Host) OpenHostPort(ctx context.Context, port uint16) error {
	h.mu.Lock()
	if slices.Contains(h.hostPorts, port) {
		h.mu.Unlock()
		return nil
	}
	h.hostPorts = append(h.hostPorts, port)
	ports := slices.Clone(h.hostPorts)
	h.mu.Unlock()
	return h.net.SetHostPorts(ctx, ports)
}

// Gateway returns the bridge's address, which guests dial to reach the
// orchestrator.
func (h *Host) Gateway() netip.Addr { return h.cfg.Network.Gateway }

// Bridge returns the bridge's name.
func (h *Host) Bridge() string { return h.cfg.Network.Bridge }

// Net returns the host network, for checks and tests.
func (h *Host) Net() *hostnet.Host { return h.net }

// vmsDir is where a chroot base keeps its VMs.
func vmsDir(chrootBaseDir string) string { return filepath.Join(chrootBaseDir, "firecracker") }
