package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultPostgresURL is the project's local test database (README.md).
const defaultPostgresURL = "postgres://kici:kici@127.0.0.1:5432/kici_test?sslmode=disable"

// benchmarks are the names -only accepts, in the order they run.
var benchmarks = []string{"rss", "latency", "dispatch", "throughput", "scaler", "scale", "profile"}

// config is what the flags set.
type config struct {
	runs, warmup       int
	dispatchRuns       int
	jobs, agents       int
	widths             []int
	engines            []string
	only               []string
	postgresURL        string
	output             string
	binDir             string
	commit             string
	profileDir         string
	profileRuns        int
	timeout            time.Duration
	settle             time.Duration
	skipRealThroughput bool
	skipFakeThroughput bool
	verbose            bool
	keep               bool
	// The scaler benchmark.
	spawns, containerSpawns  int
	scalerJobs, scalerAgents int
	// The scale benchmark.
	scaleAgents []int
	scaleJobs   int
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	h, err := newHarness(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	rep := h.runAll(ctx)
	h.close()

	switch cfg.output {
	case "json":
		err = rep.writeJSON(stdout)
	default:
		err = rep.writeTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: write report: %v\n", err)
		return 1
	}
	if len(rep.Errors) > 0 {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var engines, only, widths, scaleAgents string
	fs.IntVar(&cfg.runs, "runs", 200, "measured sequential runs of the latency benchmark, per engine")
	fs.IntVar(&cfg.warmup, "warmup", 10, "unmeasured runs before the latency and dispatch benchmarks")
	fs.IntVar(&cfg.dispatchRuns, "dispatch-runs", 200, "measured dispatches of the enqueue-to-dispatch benchmark, per engine")
	fs.IntVar(&cfg.jobs, "jobs", 1000, "jobs of the throughput benchmark (rounded up to whole runs, see -widths)")
	fs.IntVar(&cfg.agents, "agents", 8, "agents of the throughput benchmark")
	fs.StringVar(&widths, "widths", "250,10", "comma-separated jobs per run (matrix size, at most 256) of the throughput benchmark: kici-agents run the first, protocol agents each")
	fs.StringVar(&engines, "engines", "sqlite,postgres", "comma-separated database engines: sqlite, postgres")
	fs.StringVar(&only, "only", "", "comma-separated benchmarks to run (default all but scale and profile): "+strings.Join(benchmarks, ", "))
	fs.StringVar(&cfg.postgresURL, "pg", envOr("KICI_TEST_DATABASE_URL", defaultPostgresURL), "PostgreSQL URL whose role may create schemas (default $KICI_TEST_DATABASE_URL or the local test database)")
	fs.StringVar(&cfg.output, "o", "table", "output format: table or json")
	fs.StringVar(&cfg.commit, "commit", "", "commit to name in the report (default: git rev-parse --short HEAD, marked +changes when tracked files differ)")
	fs.StringVar(&cfg.binDir, "bin", "", "directory holding kici-orchestrator and kici-agent (default: build them into a temporary directory)")
	fs.StringVar(&cfg.profileDir, "profile", "", "run the profile benchmark: write CPU profiles of an in-process orchestrator (SQLite) to DIR/latency.pprof (the latency loop) and DIR/throughput.pprof (the throughput run with protocol agents)")
	fs.IntVar(&cfg.profileRuns, "profile-runs", 300, "runs of the profiled latency loop")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "bound on the whole run")
	fs.DurationVar(&cfg.settle, "settle", 2*time.Second, "how long a process idles before its RSS is read")
	fs.BoolVar(&cfg.skipRealThroughput, "no-real-throughput", false, "skip the throughput run with real kici-agent processes")
	fs.BoolVar(&cfg.skipFakeThroughput, "no-fake-throughput", false, "skip the throughput run with in-process protocol agents")
	fs.IntVar(&cfg.spawns, "spawns", 50, "measured sequential runs on fresh agents of the scaler benchmark's bare-metal scaler")
	fs.IntVar(&cfg.containerSpawns, "container-spawns", 20, "measured sequential runs on fresh agents of the scaler benchmark's container scaler")
	fs.IntVar(&cfg.scalerJobs, "scaler-jobs", 100, "jobs of the scaler benchmark's matrix run (at most 256)")
	fs.IntVar(&cfg.scalerAgents, "scaler-agents", 10, "maxAgents of the scaler benchmark's matrix run")
	fs.StringVar(&scaleAgents, "scale-agents", "1,100,1000", "comma-separated counts of connected protocol agents of the scale benchmark (one fresh orchestrator each)")
	fs.IntVar(&cfg.scaleJobs, "scale-jobs", 200, "measured sequential dispatches of the scale benchmark, per agent count")
	fs.BoolVar(&cfg.verbose, "v", false, "log progress and the children's warnings to stderr")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the temporary directory (data dirs, process logs) and print its path")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for e := range strings.SplitSeq(engines, ",") {
		switch e = strings.TrimSpace(e); e {
		case "":
		case engineSQLite, enginePostgres:
			cfg.engines = append(cfg.engines, e)
		default:
			return config{}, fmt.Errorf("-engines: unknown engine %q (want sqlite or postgres)", e)
		}
	}
	for w := range strings.SplitSeq(widths, ",") {
		if w = strings.TrimSpace(w); w == "" {
			continue
		}
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 || n > maxMatrix {
			return config{}, fmt.Errorf("-widths: %q is not a number from 1 to %d", w, maxMatrix)
		}
		cfg.widths = append(cfg.widths, n)
	}
	for a := range strings.SplitSeq(scaleAgents, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 || n > 100000 {
			return config{}, fmt.Errorf("-scale-agents: %q is not a number from 1 to 100000", a)
		}
		cfg.scaleAgents = append(cfg.scaleAgents, n)
	}
	if len(cfg.widths) == 0 {
		return config{}, errors.New("-widths: want at least one width")
	}
	for b := range strings.SplitSeq(only, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if !slices.Contains(benchmarks, b) {
			return config{}, fmt.Errorf("-only: unknown benchmark %q (want %s)", b, strings.Join(benchmarks, ", "))
		}
		cfg.only = append(cfg.only, b)
	}
	if len(cfg.only) == 0 {
		cfg.only = []string{"rss", "latency", "dispatch", "throughput", "scaler"}
	}
	if cfg.profileDir != "" && !slices.Contains(cfg.only, "profile") {
		cfg.only = append(cfg.only, "profile")
	}
	switch {
	case cfg.output != "table" && cfg.output != "json":
		return config{}, fmt.Errorf("-o %q: want table or json", cfg.output)
	case cfg.runs < 1 || cfg.dispatchRuns < 1 || cfg.profileRuns < 1 || cfg.scaleJobs < 1:
		return config{}, errors.New("-runs, -dispatch-runs, -profile-runs and -scale-jobs must be at least 1")
	case slices.Contains(cfg.only, "scale") && len(cfg.scaleAgents) == 0:
		return config{}, errors.New("-only scale needs -scale-agents")
	case cfg.warmup < 0:
		return config{}, errors.New("-warmup must not be negative")
	case cfg.jobs < 1 || cfg.agents < 1:
		return config{}, errors.New("-jobs and -agents must be at least 1")
	case cfg.spawns < 1 || cfg.containerSpawns < 1 || cfg.scalerAgents < 1 || cfg.scalerJobs < 1 || cfg.scalerJobs > maxMatrix:
		return config{}, fmt.Errorf("-spawns, -container-spawns and -scaler-agents must be at least 1, -scaler-jobs from 1 to %d", maxMatrix)
	case slices.Contains(cfg.only, "profile") && cfg.profileDir == "":
		return config{}, errors.New("-only profile needs -profile DIR")
	}
	return cfg, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
