package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

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
	manager *scaler.Manager
	outbox  *outbox.Outbox
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
	mcfg := file.ManagerConfig()
	mcfg.TokenKey = key
	mcfg.State = scaler.NewFileState(filepath.Join(cfg.DataDir, "scaler-spawns.json"))
	mcfg.Trackers = worker.Trackers
	mcfg.DeferBase, mcfg.DeferMax = cfg.ScalerDeferBase, cfg.ScalerDeferMax
	agentURL := workerAgentURL(cfg, ln)
	for i := range mcfg.Scalers {
		if mcfg.Scalers[i].OrchestratorURL == "" {
			mcfg.Scalers[i].OrchestratorURL = agentURL
		}
	}
	m, err := scaler.New(logger.With("component", "scaler"), mcfg, backends, w.Sink())
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
	logger.Info("worker auto-scaler started", "scalers", len(file.Scalers), "adopted", len(adopted), "agents_dial", agentURL)
	return &workerScalers{manager: m, outbox: ob}, nil
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
