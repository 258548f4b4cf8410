package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/kici-dev/kici/internal/metrics"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/baremetal"
	"github.com/kici-dev/kici/internal/scaler/config"
	"github.com/kici-dev/kici/internal/scaler/container"
	"github.com/kici-dev/kici/internal/scaler/firecracker"
)

// scalers owns the auto-scaler of one orchestrator: its configuration
// file, the manager and the backends, and reloads.
type scalers struct {
	s        *Server
	path     string
	instance string
	manager  *scaler.Manager

	mu       sync.Mutex // serialises reloads
	file     *config.File
	tokenKey []byte
	// fcHost is the firecracker host side, made with the first
	// firecracker scaler (under mu after start-up).
	fcHost *firecracker.Host
	// bg is cancelled when the scalers stop (stopBG), ending their
	// background loops.
	bg     context.Context
	stopBG context.CancelFunc
	// reaps counts the leftover reaps in the background (reapLater), which
	// shutdown waits for: one cut off by the database's close would leave
	// a lease behind.
	reaps sync.WaitGroup
}

// defaultAgentURL is the URL scaler agents dial when their scaler sets no
// orchestratorUrl: the public URL with ws(s) instead of http(s).
func (s *Server) defaultAgentURL() string {
	u, err := url.Parse(s.cfg.PublicURL)
	if err != nil {
		return ""
	}
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	u.Path = "/ws"
	return u.String()
}

// startScalers loads KICI_SCALER_CONFIG_PATH, builds every backend and the
// manager, reaps this instance's leftover compute, and connects the
// manager to the dispatcher. Without a path there is no auto-scaler.
func (s *Server) startScalers(ctx context.Context) error {
	if s.cfg.ScalerConfigPath == "" {
		return nil
	}
	file, err := config.Load(s.cfg.ScalerConfigPath)
	if err != nil {
		return fmt.Errorf("load scaler config: %w", err)
	}
	instance, err := instanceID(s.cfg.DataDir)
	if err != nil {
		return err
	}
	key, err := loadKey(filepath.Join(s.cfg.DataDir, "scaler-token.key"))
	if err != nil {
		return err
	}
	sc := &scalers{s: s, path: s.cfg.ScalerConfigPath, instance: instance, file: file, tokenKey: key}
	sc.bg, sc.stopBG = context.WithCancel(context.WithoutCancel(ctx))
	backends := map[string]scaler.Backend{}
	for _, c := range file.Scalers {
		b, err := sc.build(ctx, c, file)
		if err != nil {
			closeAll(backends)
			sc.stopBG()
			return err
		}
		backends[c.Name] = b
	}
	m, err := scaler.New(s.log.With("component", "scaler"), sc.managerConfig(file), backends,
		scalerSink{log: s.log, db: s.db, pub: s.publisher(), disp: s.disp, metrics: s.metrics})
	if err != nil {
		closeAll(backends)
		sc.stopBG()
		return err
	}
	// Adopt what a previous process spawned and still runs; only then
	// reap this instance's leftovers, sparing the adopted.
	adopted, err := m.Recover(ctx)
	if err != nil {
		s.log.Warn("recover scaler agents failed", "error", err)
	}
	for name, b := range backends {
		sc.reapLater(ctx, name, b, adopted)
	}
	sc.manager = m
	s.scalers = sc
	s.metrics.WatchScalers(func() []metrics.ScalerUsage {
		var out []metrics.ScalerUsage
		for _, st := range m.Status() {
			out = append(out, metrics.ScalerUsage{Name: st.Name, Backend: st.Type, Active: st.Active, Spawning: st.Spawning, MaxAgents: st.MaxAgents})
		}
		return out
	})
	s.disp.SetScaler(m)
	s.log.Info("auto-scaler started", "scalers", len(file.Scalers), "instance", instance, "config", s.cfg.ScalerConfigPath)
	return nil
}

func closeAll(backends map[string]scaler.Backend) {
	for _, b := range backends {
		_ = b.Close(context.Background())
	}
}

func (sc *scalers) managerConfig(file *config.File) scaler.Config {
	cfg := file.ManagerConfig()
	cfg.TokenKey = sc.tokenKey
	cfg.State = spawnStore{sc.s.db}
	cfg.DeferBase, cfg.DeferMax = sc.s.cfg.ScalerDeferBase, sc.s.cfg.ScalerDeferMax
	cfg.Trackers = sc.trackers
	for i := range cfg.Scalers {
		switch {
		case cfg.Scalers[i].OrchestratorURL != "":
		case cfg.Scalers[i].Type == config.TypeFirecracker:
			cfg.Scalers[i].OrchestratorURL = sc.firecrackerAgentURL(file)
		default:
			cfg.Scalers[i].OrchestratorURL = sc.s.defaultAgentURL()
		}
	}
	return cfg
}

// build makes one scaler's backend. A container backend reaps the
// compute this orchestrator instance left behind for that scaler (the
// agents of a previous process cannot be resumed: their tokens died with
// it); containers of other instances are never touched.
func (sc *scalers) build(ctx context.Context, c config.Scaler, file *config.File) (scaler.Backend, error) {
	if c.Type == config.TypeFirecracker {
		return sc.buildFirecracker(ctx, c, file)
	}
	return buildHostBackend(ctx, sc.s.log, sc.s.cfg.DataDir, sc.instance, c)
}

// buildHostBackend makes a bare-metal or container scaler's backend, which
// need nothing but the host (no database): an orchestrator's and a
// worker's alike.
func buildHostBackend(ctx context.Context, logger *slog.Logger, dataDir, instance string, c config.Scaler) (scaler.Backend, error) {
	log := logger.With("scaler", c.Name, "backend", c.Type)
	switch c.Type {
	case config.TypeBareMetal:
		return baremetal.New(log, baremetal.Config{Name: c.Name, WorkDir: filepath.Join(dataDir, "scalers", c.Name)}), nil
	case config.TypeContainer:
		b, err := container.New(ctx, log, container.Config{
			Name: c.Name, Instance: instance, Host: c.Container.Host, SocketPath: c.Container.SocketPath,
			Runtime: c.Container.Runtime, ExtraHosts: c.Container.ExtraHosts,
		})
		if err != nil {
			return nil, fmt.Errorf("scaler %q: %w", c.Name, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("scaler %q: type %q is not supported here", c.Name, c.Type)
}

// reapLater removes, in the background, the compute this instance left
// behind for a scaler that was not adopted: stopping containers takes
// their stop grace, and the orchestrator should serve meanwhile.
func (sc *scalers) reapLater(ctx context.Context, name string, b scaler.Backend, keep []string) {
	r, ok := b.(scaler.Reaper)
	if !ok {
		return
	}
	log := sc.s.log.With("scaler", name)
	sc.reaps.Go(func() {
		reaped, err := r.ReapLeftovers(context.WithoutCancel(ctx), keep)
		if err != nil {
			log.Warn("reap leftover compute failed", "error", err)
		} else if len(reaped) > 0 {
			log.Info("leftover compute reaped", "agents", reaped)
		}
	})
}

// waitReaps waits for the background reaps, or until ctx ends.
func (sc *scalers) waitReaps(ctx context.Context) {
	done := make(chan struct{})
	go func() { sc.reaps.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		sc.s.log.Warn("shutting down with leftover reaps still running; the next start sweeps again")
	}
}

// Reload re-reads the configuration and applies it all or nothing.
func (sc *scalers) Reload(ctx context.Context) (scaler.ReloadResult, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.s.metrics.ScalerConfigReloads.WithLabelValues("attempted").Inc()
	res, err := sc.reload(ctx)
	if err != nil {
		sc.s.metrics.ScalerConfigReloads.WithLabelValues("failed").Inc()
		sc.s.log.Warn("scaler reload failed; keeping the running config", "error", err)
		return res, err
	}
	sc.s.metrics.ScalerConfigReloads.WithLabelValues("success").Inc()
	sc.s.log.Info("scaler config reloaded", "added", res.Added, "updated", res.Updated, "retired", res.Retired)
	sc.s.disp.JobsQueued()
	return res, nil
}

func (sc *scalers) reload(ctx context.Context) (scaler.ReloadResult, error) {
	file, err := config.Load(sc.path)
	if err != nil {
		return scaler.ReloadResult{}, fmt.Errorf("load %s: %w", sc.path, err)
	}
	plan := config.Plan(sc.file, file)
	if err := plan.Err(); err != nil {
		return scaler.ReloadResult{}, err
	}
	built := map[string]scaler.Backend{}
	for _, c := range file.Scalers {
		for _, name := range plan.Added {
			// A scaler removed earlier and still draining keeps its backend:
			// a second one would reap the containers its agents run in.
			if name == c.Name && !sc.manager.Running(name) {
				b, err := sc.build(ctx, c, file)
				if err != nil {
					closeAll(built)
					return scaler.ReloadResult{}, err
				}
				sc.reapLater(ctx, c.Name, b, nil)
				built[c.Name] = b
			}
		}
	}
	res, err := sc.manager.Reload(sc.managerConfig(file), built)
	if err != nil {
		closeAll(built)
		return scaler.ReloadResult{}, err
	}
	sc.file = file
	return res, nil
}

// reloadOnSIGHUP reloads the scaler configuration on every SIGHUP.
func (sc *scalers) reloadOnSIGHUP(ctx context.Context) {
	onSIGHUP(ctx, func() { _, _ = sc.Reload(ctx) }) // logged and counted by Reload
}

// onSIGHUP calls fn on every SIGHUP until ctx ends.
func onSIGHUP(ctx context.Context, fn func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			fn()
		}
	}
}

// Status, Orphans and StopOrphans serve the API.
func (sc *scalers) Status() []scaler.ScalerStatus { return sc.manager.Status() }

func (sc *scalers) Orphans(ctx context.Context) ([]scaler.Orphan, error) {
	return sc.manager.Orphans(ctx)
}

func (sc *scalers) Retry(name string) error { return sc.manager.Retry(name) }

func (sc *scalers) StopOrphans(ctx context.Context, ids []string) ([]scaler.StopOutcome, error) {
	return sc.manager.StopOrphans(ctx, ids)
}
