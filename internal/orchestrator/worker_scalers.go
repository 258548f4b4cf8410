package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"

	"github.com/kici-dev/kici/internal/cluster/outbox"
	"github.com/kici-dev/kici/internal/cluster/worker"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/config"
)

// workerScalers is the auto-scaler of a cluster worker: the same
// scalers.yaml as an orchestrator's, but no database. Spawn records live
// in a file of the data dir, what the spawns mean for their jobs goes to
// the coordinators through the worker's outbox, and the agents dial the
// worker, which relays them to a coordinator.
type workerScalers struct {
	manager  *scaler.Manager
	outbox   *outbox.Outbox
	log      *slog.Logger
	cfg      Config
	agentURL string
	instance string
	key      []byte

	mu   sync.Mutex // serialises reloads
	file *config.File
}

// startWorkerScalers loads cfg.ScalerConfigPath and starts its scalers for
// worker w, whose agents' endpoint listens on ln.
func startWorkerScalers(ctx context.Context, logger *slog.Logger, cfg Config, w *worker.Worker, ln net.Listener) (*workerScalers, error) {
	file, err := config.Load(cfg.ScalerConfigPath)
	if err != nil {
		return nil, fmt.Errorf("load scaler config: %w", err)
	}
	for _, c := range file.Scalers {
		if c.Type == config.TypeFirecracker {
			return nil, fmt.Errorf("scaler %q: firecracker scalers run on a coordinator or a standalone orchestrator (their VM addresses are leased in the database); a worker runs bare-metal and container scalers", c.Name)
		}
	}
	instance, err := instanceID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	key, err := loadKey(filepath.Join(cfg.DataDir, "scaler-token.key"))
	if err != nil {
		return nil, err
	}
	ob, err := outbox.Open(filepath.Join(cfg.DataDir, "outbox.db"), outbox.Options{})
	if err != nil {
		return nil, fmt.Errorf("open the worker's outbox: %w", err)
	}
	backends := map[string]scaler.Backend{}
	fail := func(err error) (*workerScalers, error) {
		closeAll(backends)
		return nil, errors.Join(err, ob.Close())
	}
	for _, c := range file.Scalers {
		b, err := buildHostBackend(ctx, logger, cfg.DataDir, instance, c)
		if err != nil {
			return fail(err)
		}
		backends[c.Name] = b
	}
	ws := &workerScalers{outbox: ob, log: logger, cfg: cfg, agentURL: workerAgentURL(cfg, ln), instance: instance, key: key, file: file}
	m, err := scaler.New(logger.With("component", "scaler"), ws.managerConfig(file), backends, w.Sink())
	if err != nil {
		return fail(err)
	}
	// Adopt what the previous process spawned and still runs (its agents
	// reconnect to the worker with tokens of the kept key); then reap the
	// rest of this instance's leftovers.
	adopted, err := m.Recover(ctx)
	if err != nil {
		logger.Warn("recover scaler agents failed", "error", err)
	}
	for name, b := range backends {
		if r, ok := b.(scaler.Reaper); ok {
			if reaped, err := r.ReapLeftovers(ctx, adopted); err != nil {
				logger.Warn("reap leftover compute failed", "scaler", name, "error", err)
			} else if len(reaped) > 0 {
				logger.Info("leftover compute reaped", "scaler", name, "agents", reaped)
			}
		}
	}
	w.SetScalers(m, ob)
	logger.Info("worker auto-scaler started", "scalers", len(file.Scalers), "adopted", len(adopted), "agents_dial", ws.agentURL)
	ws.manager = m
	return ws, nil
}

// managerConfig is the manager's configuration for file on this worker.
func (ws *workerScalers) managerConfig(file *config.File) scaler.Config {
	mcfg := file.ManagerConfig()
	mcfg.TokenKey = ws.key
	mcfg.State = scaler.NewFileState(filepath.Join(ws.cfg.DataDir, "scaler-spawns.json"))
	mcfg.Trackers = worker.Trackers
	mcfg.DeferBase, mcfg.DeferMax = ws.cfg.ScalerDeferBase, ws.cfg.ScalerDeferMax
	for i := range mcfg.Scalers {
		if mcfg.Scalers[i].OrchestratorURL == "" {
			mcfg.Scalers[i].OrchestratorURL = ws.agentURL
		}
	}
	return mcfg
}

// reload re-reads the scaler configuration and applies it all or nothing,
// as an orchestrator's reload does; the coordinators see the new scalers
// in the next heartbeat.
func (ws *workerScalers) reload(ctx context.Context) (scaler.ReloadResult, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	file, err := config.Load(ws.cfg.ScalerConfigPath)
	if err != nil {
		return scaler.ReloadResult{}, fmt.Errorf("load %s: %w", ws.cfg.ScalerConfigPath, err)
	}
	for _, c := range file.Scalers {
		if c.Type == config.TypeFirecracker {
			return scaler.ReloadResult{}, fmt.Errorf("scaler %q: firecracker scalers do not run on a worker", c.Name)
		}
	}
	plan := config.Plan(ws.file, file)
	if err := plan.Err(); err != nil {
		return scaler.ReloadResult{}, err
	}
	built := map[string]scaler.Backend{}
	for _, c := range file.Scalers {
		if slices.Contains(plan.Added, c.Name) && !ws.manager.Running(c.Name) {
			b, err := buildHostBackend(ctx, ws.log, ws.cfg.DataDir, ws.instance, c)
			if err != nil {
				closeAll(built)
				return scaler.ReloadResult{}, err
			}
			built[c.Name] = b
		}
	}
	res, err := ws.manager.Reload(ws.managerConfig(file), built)
	if err != nil {
		closeAll(built)
		return scaler.ReloadResult{}, err
	}
	ws.file = file
	return res, nil
}

// reloadOnSIGHUP reloads the scaler configuration on every SIGHUP.
func (ws *workerScalers) reloadOnSIGHUP(ctx context.Context) {
	onSIGHUP(ctx, func() {
		if res, err := ws.reload(ctx); err != nil {
			ws.log.Warn("scaler reload failed; keeping the running config", "error", err)
		} else {
			ws.log.Info("scaler config reloaded", "added", res.Added, "updated", res.Updated, "retired", res.Retired)
		}
	})
}

// workerAgentURL is where a worker's scaler agents dial: the public URL
// when one was set, else the worker's own listener.
func workerAgentURL(cfg Config, ln net.Listener) string {
	if cfg.PublicURL != "" && cfg.PublicURL != DefaultPublicURL {
		return (&Server{cfg: cfg}).defaultAgentURL()
	}
	return "ws://" + ln.Addr().String() + "/ws"
}

// close stops the scalers (destroying their agents, as an orchestrator's
// shutdown does) and closes the outbox; what it still holds is sent after
// the next start.
func (ws *workerScalers) close(ctx context.Context) error {
	return errors.Join(ws.manager.Close(ctx), ws.outbox.Close())
}
