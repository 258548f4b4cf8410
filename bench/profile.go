package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/kici-dev/kici/internal/orchestrator"
)

// benchProfile runs two loads against an orchestrator inside this process
// (orchestrator.New and Run, SQLite) and writes a CPU profile of each to
// cfg.profileDir: latency.pprof over the latency loop with one real
// kici-agent, throughput.pprof over the throughput run with protocol
// agents. A profile holds the orchestrator and, much smaller, the bench's
// HTTP client and protocol agents; the kici-agent and git processes are
// elsewhere (the latency breakdown covers them).
func (h *harness) benchProfile(ctx context.Context) {
	if err := os.MkdirAll(h.cfg.profileDir, 0o755); err != nil {
		h.rep.fail("profile", engineSQLite, err)
		return
	}
	for _, load := range []string{"latency", "throughput"} {
		sc := &scope{}
		err := h.profile(ctx, sc, load)
		sc.close()
		if err != nil {
			h.rep.fail("profile "+load, engineSQLite, err)
		}
	}
}

func (h *harness) profile(ctx context.Context, sc *scope, load string) error {
	o, err := h.startInProcess(ctx, sc)
	if err != nil {
		return err
	}
	path := filepath.Join(h.cfg.profileDir, load+".pprof")
	var res result
	switch load {
	case "latency":
		if _, err := h.startAgent(ctx, sc, o, "bench-agent", true); err != nil {
			return err
		}
		repo, err := makeRepo(ctx, h.dir("repo-trivial"), map[string]string{"trivial.yml": trivialWorkflow})
		if err != nil {
			return err
		}
		if err := o.addSource(ctx, "trivial", repo); err != nil {
			return err
		}
		if _, _, err := h.latencyLoop(ctx, o.client, h.cfg.warmup, 0); err != nil {
			return err
		}
		var samples []sample
		err = profiled(path, func() error {
			samples, _, err = h.latencyLoop(ctx, o.client, 0, h.cfg.profileRuns)
			return err
		})
		if err != nil {
			return err
		}
		total := make(dist, len(samples))
		for i, s := range samples {
			total[i] = s.end.Sub(s.start)
		}
		res = distResult(result{Name: "trigger → success, in-process orchestrator, profiling"}, total)
	case "throughput":
		// throughputOn starts its protocol agents; the profile covers them
		// and the warm-up too, which is small.
		err = profiled(path, func() error {
			res, err = h.throughputOn(ctx, sc, o, engineSQLite, false, h.cfg.widths[0])
			return err
		})
		if err != nil {
			return err
		}
		res.Name = "throughput, in-process orchestrator, profiling"
	}
	res.Benchmark, res.Engine = "profile", engineSQLite
	res.Note = fmt.Sprintf("CPU profile: go tool pprof -top %s", path)
	h.rep.add(res)
	return nil
}

// profiled runs fn with the CPU profiler writing to path.
func profiled(path string, fn func() error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	err = fn()
	pprof.StopCPUProfile()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(err, os.Remove(path))
	}
	return nil
}

// startInProcess runs orchestrator.New and Run in this process, on SQLite
// in a fresh data dir, logging JSON at info level to a file, as `serve`
// would with the same environment.
func (h *harness) startInProcess(ctx context.Context, sc *scope) (*server, error) {
	dir := h.dir("inprocess-orchestrator")
	logFile, err := os.Create(filepath.Join(dir, "orchestrator.log"))
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	cfg, _, err := orchestrator.ConfigFromEnv(func(string) string { return "" }, nil)
	if err != nil {
		logFile.Close()
		return nil, err
	}
	token := "bench-" + randomHex(8)
	cfg.HTTPAddr, cfg.PublicURL = addr, "http://"+addr
	cfg.DataDir, cfg.BootstrapAdminToken = filepath.Join(dir, "data"), token
	logger := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srvCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	srv, err := orchestrator.New(srvCtx, logger, cfg)
	if err != nil {
		stop()
		logFile.Close()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(srvCtx) }()
	sc.add(func() {
		stop()
		<-done
		logFile.Close()
	})
	o := &server{client: newClient(addr, token), addr: addr}
	if err := poll(ctx, 30*time.Second, "in-process orchestrator ready", func() bool { return o.ready(ctx) }); err != nil {
		return nil, err
	}
	return o, nil
}
