package orchestrator

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/config"
	"github.com/kici-dev/kici/internal/scaler/firecracker"
	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
)

// firecrackerHost returns the host side every firecracker scaler of this
// process shares, made on first use from the file's network block and
// prepared (bridge, rules, isolation probe). A host that cannot be
// prepared is logged and kept: its scalers stay configured, their spawns
// are refused naming the problem, and status and diagnose show it.
func (sc *scalers) firecrackerHost(ctx context.Context, file *config.File) (*firecracker.Host, error) {
	if sc.fcHost != nil {
		return sc.fcHost, nil
	}
	n := file.Firecracker
	netCfg := hostnet.Config{Bridge: n.Bridge, Gateway: n.Gateway, Prefix: n.CIDR, Table: n.Table, HostPorts: sc.guestPorts(file)}
	h, err := firecracker.NewHost(sc.s.log.With("component", "firecracker-host"), firecracker.HostConfig{
		Network: netCfg, Netmask: n.Netmask, AutoProvision: n.AutoProvisionHost,
		Addresses: firecracker.StoreAddresses(sc.s.db, sc.instance+"/"+n.Bridge, n.CIDR, n.Gateway),
	})
	if err != nil {
		return nil, fmt.Errorf("firecracker network block: %w", err)
	}
	_ = h.Prepare(ctx) // logged by Prepare; spawns report it
	sc.fcHost = h
	return h, nil
}

// buildFirecracker makes a firecracker scaler's backend and, in the
// background, pre-builds its overlay templates and then the snapshots of
// its warm-start label sets.
func (sc *scalers) buildFirecracker(ctx context.Context, c config.Scaler, file *config.File) (scaler.Backend, error) {
	h, err := sc.firecrackerHost(ctx, file)
	if err != nil {
		return nil, err
	}
	fc := c.Firecracker
	b, err := firecracker.New(sc.s.log.With("scaler", c.Name), firecracker.Config{
		Name: c.Name, Host: h, FirecrackerPath: fc.FirecrackerPath, JailerPath: fc.JailerPath, KernelPath: fc.KernelPath,
		UID: fc.UID, GID: fc.GID, ChrootBaseDir: fc.ChrootBaseDir, VCPUCount: fc.VCPUCount, MemSizeMib: fc.MemSizeMib,
	})
	if err != nil {
		return nil, fmt.Errorf("scaler %q: %w", c.Name, err)
	}
	var sizes []int
	for _, ls := range c.LabelSets {
		sizes = append(sizes, ls.Firecracker.OverlayDriveSizeMib)
	}
	// The label sets as the manager has them (the mirror rule applied), so
	// that the snapshots are those its spawns ask for.
	var sets []scaler.LabelSet
	for _, m := range file.ManagerConfig().Scalers {
		if m.Name == c.Name {
			sets = m.LabelSets
		}
	}
	bg := context.WithoutCancel(ctx)
	go func() {
		if t, err := h.Templates(fc.ChrootBaseDir); err == nil {
			if err := t.Prebuild(bg, sizes); err != nil {
				sc.s.log.Warn("overlay templates not pre-built; the first spawn of each size builds its own", "scaler", c.Name, "error", err)
			}
		}
		b.Prewarm(sets)
	}()
	return b, nil
}

// guestPorts are the host's TCP ports guests may reach: the port of each
// firecracker scaler's orchestrator URL that points at the gateway (the
// orchestrator's own port when a scaler sets none). Every other host port
// refuses them.
func (sc *scalers) guestPorts(file *config.File) []uint16 {
	var out []uint16
	add := func(raw string) {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() != file.Firecracker.Gateway.String() {
			return
		}
		p := u.Port()
		if p == "" {
			p = map[string]string{"wss": "443"}[u.Scheme]
			if p == "" {
				p = "80"
			}
		}
		if n, err := strconv.ParseUint(p, 10, 16); err == nil && !slices.Contains(out, uint16(n)) {
			out = append(out, uint16(n))
		}
	}
	add(sc.firecrackerAgentURL(file))
	for _, c := range file.Scalers {
		if c.Type == config.TypeFirecracker && c.OrchestratorURL != "" {
			add(c.OrchestratorURL)
		}
	}
	return out
}

// firecrackerAgentURL is where a guest reaches this orchestrator when its
// scaler sets no orchestratorUrl: the bridge's gateway, on the port the
// orchestrator listens on.
func (sc *scalers) firecrackerAgentURL(file *config.File) string {
	port := "4000"
	if sc.s.ln != nil {
		if _, p, err := net.SplitHostPort(sc.s.ln.Addr().String()); err == nil {
			port = p
		}
	}
	if _, err := strconv.Atoi(port); err != nil {
		port = "4000"
	}
	return "ws://" + net.JoinHostPort(file.Firecracker.Gateway.String(), port) + "/ws"
}
