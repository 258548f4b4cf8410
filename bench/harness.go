package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Database engines.
const (
	engineSQLite   = "sqlite"
	enginePostgres = "postgres"
)

// harness holds what every benchmark shares: the configuration, the
// binaries, a temporary directory and the report. Each benchmark stops
// what it started through its own scope.
type harness struct {
	cfg    config
	stderr io.Writer
	tmp    string
	bin    string // directory of kici-orchestrator and kici-agent
	rep    *report

	mu  sync.Mutex
	seq int
}

func newHarness(ctx context.Context, cfg config, stderr io.Writer) (*harness, error) {
	if _, err := os.Stat("go.mod"); err != nil {
		return nil, fmt.Errorf("run from the repository root (go run ./bench): %w", err)
	}
	tmp, err := os.MkdirTemp("", "kici-bench-")
	if err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, stderr: stderr, tmp: tmp, rep: newReport(ctx)}
	if cfg.commit != "" {
		h.rep.Commit = cfg.commit
	}
	h.bin, err = filepath.Abs(cfg.binDir) // children run in their own directories
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if cfg.binDir == "" {
		h.bin = filepath.Join(tmp, "bin")
		if err := build(ctx, h.bin); err != nil {
			os.RemoveAll(tmp)
			return nil, err
		}
	}
	for _, b := range []string{"kici-orchestrator", "kici-agent"} {
		if _, err := os.Stat(filepath.Join(h.bin, b)); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("binary %s: %w", b, err)
		}
	}
	return h, nil
}

// build compiles the two binaries the way `make build` does.
func build(ctx context.Context, dir string) error {
	for _, b := range []string{"kici-orchestrator", "kici-agent"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, b), "./cmd/"+b)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/%s: %w\n%s", b, err, out)
		}
	}
	return nil
}

// logf reports progress when -v is set.
func (h *harness) logf(format string, args ...any) {
	if h.cfg.verbose {
		fmt.Fprintf(h.stderr, "bench: "+format+"\n", args...)
	}
}

// dir returns a fresh directory under the temporary directory.
func (h *harness) dir(name string) string {
	h.mu.Lock()
	h.seq++
	n := h.seq
	h.mu.Unlock()
	d := filepath.Join(h.tmp, fmt.Sprintf("%02d-%s", n, name))
	_ = os.MkdirAll(d, 0o755)
	return d
}

// close removes the temporary directory, unless -keep. Each benchmark has
// already stopped its processes (see scope).
func (h *harness) close() {
	if h.cfg.keep {
		fmt.Fprintf(h.stderr, "bench: files kept in %s\n", h.tmp)
		return
	}
	os.RemoveAll(h.tmp)
}

// scope collects the cleanups of one benchmark, so its processes are gone
// before the next benchmark starts.
type scope struct {
	mu sync.Mutex
	fs []func()
}

func (s *scope) add(f func()) {
	s.mu.Lock()
	s.fs = append(s.fs, f)
	s.mu.Unlock()
}

func (s *scope) close() {
	s.mu.Lock()
	fs := s.fs
	s.fs = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// runAll runs the selected benchmarks in order and returns the report.
func (h *harness) runAll(ctx context.Context) *report {
	h.rep.Config = reportConfig{
		Runs: h.cfg.runs, Warmup: h.cfg.warmup, DispatchRuns: h.cfg.dispatchRuns,
		Jobs: h.cfg.jobs, Widths: h.cfg.widths, Agents: h.cfg.agents, Engines: h.cfg.engines,
	}
	if slices.Contains(h.cfg.only, "scaler") {
		c := &h.rep.Config
		c.Spawns, c.ContainerSpawns, c.ScalerJobs, c.ScalerAgents = h.cfg.spawns, h.cfg.containerSpawns, h.cfg.scalerJobs, h.cfg.scalerAgents
	}
	if slices.Contains(h.cfg.only, "scale") {
		h.rep.Config.ScaleAgents, h.rep.Config.ScaleJobs = h.cfg.scaleAgents, h.cfg.scaleJobs
	}
	for _, b := range benchmarks {
		if !slices.Contains(h.cfg.only, b) {
			continue
		}
		if ctx.Err() != nil {
			h.rep.fail(b, "", fmt.Errorf("not run: %w", context.Cause(ctx)))
			continue
		}
		start := time.Now()
		h.logf("%s: start", b)
		switch b {
		case "rss":
			h.benchRSS(ctx)
		case "latency":
			for _, e := range h.cfg.engines {
				h.benchLatency(ctx, e)
			}
		case "dispatch":
			for _, e := range h.cfg.engines {
				h.benchDispatch(ctx, e)
			}
		case "throughput":
			// Real agents run the first width only; protocol agents
			// every width, to show how the run's width weighs.
			for _, e := range h.cfg.engines {
				if !h.cfg.skipRealThroughput {
					h.benchThroughput(ctx, e, true, h.cfg.widths[0])
				}
				if !h.cfg.skipFakeThroughput {
					for _, w := range h.cfg.widths {
						h.benchThroughput(ctx, e, false, w)
					}
				}
			}
		case "scaler":
			h.benchScaler(ctx) // SQLite only, whatever -engines says
		case "scale":
			h.benchScale(ctx) // SQLite only, whatever -engines says
		case "profile":
			h.benchProfile(ctx)
		}
		h.logf("%s: done in %s", b, time.Since(start).Round(time.Millisecond))
	}
	h.rep.Elapsed = time.Since(h.rep.start).Round(time.Millisecond).String()
	h.rep.LoadEnd = loadAverage()
	return h.rep
}

// databaseURL returns "" for SQLite, or the URL of a fresh PostgreSQL
// schema that sc drops when it closes.
func (h *harness) databaseURL(ctx context.Context, engine string, sc *scope) (string, error) {
	if engine != enginePostgres {
		return "", nil
	}
	url, drop, err := newSchema(ctx, h.cfg.postgresURL)
	if err != nil {
		return "", err
	}
	sc.add(drop)
	return url, nil
}

// machine describes the host for the report.
func machine() string {
	model := ""
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s/%s, %d CPUs (%s%s)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), model, mem)
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func gitCommit(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	// Tracked files changed since the commit make the numbers not the
	// commit's; untracked files (other work in the tree) do not.
	if err := exec.CommandContext(ctx, "git", "diff", "--quiet", "HEAD", "--", ".", ":(exclude)bench", ":(exclude)docs", ":(exclude)Makefile").Run(); err != nil {
		commit += "+changes"
	}
	return commit
}
