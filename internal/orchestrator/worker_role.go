package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/cluster/worker"
)

// runWorker runs kici-orchestrator as a cluster worker: no database; it
// joins the coordinators (once, with the join token), keeps a channel to
// each, and serves /healthz and /readyz (ready while connected to at
// least one coordinator) on KICI_HTTP_ADDR, until ctx ends. The worker's
// data dir holds its credential; one worker process owns it at a time.
func runWorker(ctx context.Context, logger *slog.Logger, cfg Config) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %q: %w", cfg.DataDir, err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.release()
	host, _ := os.Hostname()
	if err := lock.record(lockHolder{Command: "kici-orchestrator serve (worker)", PID: os.Getpid(), Hostname: host, Addr: cfg.HTTPAddr,
		StartedAt: time.Now().UTC()}); err != nil {
		return err
	}
	// The scalers start after the worker (they need its sink and the
	// listener); isolation reads them when it happens.
	var scalers *workerScalers
	w, err := worker.New(worker.Config{CoordinatorURLs: cfg.CoordinatorURLs, JoinToken: cfg.JoinToken,
		CredentialFile: cfg.CredentialFile, Version: "kici", Log: logger.With("component", "worker"),
		IsolationLimit: cfg.WorkerIsolationLimit,
		OnIsolated: func() {
			if scalers != nil {
				stopped := scalers.manager.StopAll(context.WithoutCancel(ctx), "cut from every coordinator for longer than KICI_CLUSTER_WORKER_ISOLATION_LIMIT_MS")
				logger.Warn("stopped this worker's scaler agents: no coordinator could see their jobs", "agents", stopped)
			}
		}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	if cfg.ScalerConfigPath != "" {
		if scalers, err = startWorkerScalers(ctx, logger, cfg, w, ln); err != nil {
			ln.Close()
			return err
		}
	}
	mux := http.NewServeMux()
	// Agents connect to the worker as to an orchestrator; the worker
	// relays them to a coordinator.
	mux.HandleFunc("GET /ws", w.ServeAgent)
	mux.HandleFunc("GET /api/v1/sources/{name}/archive/{sha}", w.ServeArchive)
	// So are a job's artifact and cache transfers (the same pass-through;
	// the job token authenticates them at the coordinator).
	for _, p := range []string{"PUT /api/v1/runs/{id}/jobs/{job}/artifacts", "GET /api/v1/runs/{id}/jobs/{job}/artifacts",
		"GET /api/v1/caches", "GET /api/v1/caches/{id}", "PUT /api/v1/caches"} {
		mux.HandleFunc(p, w.ServeArchive)
	}
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = rw.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !w.Ready() {
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = rw.Write([]byte("not connected to any coordinator\n"))
			return
		}
		_, _ = fmt.Fprintf(rw, "ready: node %s connected to %d coordinator(s)\n", w.NodeID(), len(w.Connected()))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Go(func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	})
	wg.Go(func() { errc <- w.Run(ctx) })
	if scalers != nil {
		wg.Go(func() { _ = scalers.manager.Run(ctx) })
		wg.Go(func() { scalers.reloadOnSIGHUP(ctx) })
	}
	logger.Info("worker listening", "addr", ln.Addr().String(), "coordinators", cfg.CoordinatorURLs)
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	cancel()
	sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer stop()
	err = srv.Shutdown(sctx)
	wg.Wait()
	if scalers != nil {
		// Stopping agents waits out their stop grace.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		err = errors.Join(err, scalers.close(cctx))
		cancel()
	}
	return errors.Join(first, err)
}
