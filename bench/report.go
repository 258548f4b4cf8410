package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"
)

// report is everything one bench run prints.
type report struct {
	start time.Time

	Date    string       `json:"date"`
	Commit  string       `json:"commit"`
	Machine string       `json:"machine"`
	Go      string       `json:"go"`
	Load    string       `json:"load_average_at_start"`
	LoadEnd string       `json:"load_average_at_end"`
	Elapsed string       `json:"elapsed"`
	Config  reportConfig `json:"config"`
	Results []result     `json:"results"`
	// Breakdown says where the time of the latency and dispatch benchmarks
	// goes, per engine.
	Breakdown []stage `json:"breakdown,omitempty"`
	// Bugs are wrong behaviour seen while measuring (the numbers stand).
	Bugs   []string `json:"bugs,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

type reportConfig struct {
	Runs         int      `json:"runs"`
	Warmup       int      `json:"warmup"`
	DispatchRuns int      `json:"dispatch_runs"`
	Jobs         int      `json:"jobs"`
	Widths       []int    `json:"widths"`
	Agents       int      `json:"agents"`
	Engines      []string `json:"engines"`
	// The scaler benchmark's counts.
	Spawns          int `json:"spawns,omitempty"`
	ContainerSpawns int `json:"container_spawns,omitempty"`
	ScalerJobs      int `json:"scaler_jobs,omitempty"`
	ScalerAgents    int `json:"scaler_agents,omitempty"`
	// The scale benchmark's agent counts and jobs per count.
	ScaleAgents []int `json:"scale_agents,omitempty"`
	ScaleJobs   int   `json:"scale_jobs,omitempty"`
}

// result is one row of the table.
type result struct {
	Benchmark string `json:"benchmark"`
	Name      string `json:"name"`
	Engine    string `json:"engine,omitempty"`
	N         int    `json:"n,omitempty"`
	Unit      string `json:"unit"`
	// P50 and P99 are set for distributions, Value for single figures.
	P50    *float64 `json:"p50,omitempty"`
	P99    *float64 `json:"p99,omitempty"`
	Max    *float64 `json:"max,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	Target string   `json:"target,omitempty"`
	// Met is nil when the row has no target.
	Met  *bool  `json:"met,omitempty"`
	Note string `json:"note,omitempty"`
	// Skipped says why the benchmark could not run here (not a failure).
	Skipped string `json:"skipped,omitempty"`
}

// stage is one step of the latency breakdown, in milliseconds.
type stage struct {
	Benchmark string  `json:"benchmark"`
	Engine    string  `json:"engine"`
	Name      string  `json:"stage"`
	N         int     `json:"n"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
}

func newReport(ctx context.Context) *report {
	now := time.Now()
	return &report{
		start:   now,
		Date:    now.UTC().Format("2006-01-02 15:04 MST"),
		Commit:  gitCommit(ctx),
		Machine: machine(),
		Go:      runtime.Version(),
		Load:    loadAverage(),
	}
}

func (r *report) add(res result) { r.Results = append(r.Results, res) }

func (r *report) fail(bench, engine string, err error) {
	msg := bench
	if engine != "" {
		msg += " (" + engine + ")"
	}
	r.Errors = append(r.Errors, msg+": "+err.Error())
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *report) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "kici bench: %s, commit %s, %s, %s, load average %s at start and %s at end, took %s\n\n",
		r.Date, r.Commit, r.Machine, r.Go, r.Load, r.LoadEnd, r.Elapsed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BENCHMARK\tENGINE\tN\tRESULT\tTARGET\tVERDICT")
	for _, res := range r.Results {
		n := ""
		if res.N > 0 {
			n = fmt.Sprint(res.N)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", res.Name, res.Engine, n, res.text(), res.Target, res.verdict())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range r.Results {
		if res.Note != "" {
			fmt.Fprintf(w, "  * %s (%s): %s\n", res.Name, res.Engine, res.Note)
		}
	}
	for _, sec := range []struct{ bench, title string }{
		{"latency", "Where the trigger-to-success time goes (timestamps from the bench, the processes' JSON logs and the job log; ms)"},
		{"dispatch", "Where the enqueue-to-dispatch time goes (queue row, orchestrator JSON log, frame read; ms)"},
		{"scaler-bare-metal", "Where a bare-metal spawn's time goes (orchestrator and agent JSON logs, the job's scaler events; ms)"},
		{"scaler-container", "Where a container spawn's time goes (orchestrator JSON log with the agent's output, the job's scaler events; ms)"},
	} {
		var rows []stage
		for _, s := range r.Breakdown {
			if s.Benchmark == sec.bench {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", sec.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ENGINE\tSTAGE\tN\tP50\tP99")
		for _, s := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\n", s.Engine, s.Name, s.N, s.P50, s.P99)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Bugs) > 0 {
		fmt.Fprintf(w, "\nBugs seen:\n")
		for _, b := range r.Bugs {
			fmt.Fprintf(w, "  - %s\n", b)
		}
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "\nErrors:\n")
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  - %s\n", e)
		}
	}
	return nil
}

func (res result) text() string {
	switch {
	case res.Skipped != "":
		return "not run: " + res.Skipped
	case res.P50 != nil && res.P99 == nil:
		// A published median (the anchors): given as published.
		return fmt.Sprintf("p50 %g %s", *res.P50, res.Unit)
	case res.P50 != nil:
		s := fmt.Sprintf("p50 %s, p99 %s", num(*res.P50), num(*res.P99))
		if res.Max != nil {
			s += ", max " + num(*res.Max)
		}
		return s + " " + res.Unit
	case res.Value != nil:
		return num(*res.Value) + " " + res.Unit
	}
	return "-"
}

func (res result) verdict() string {
	switch {
	case res.Met == nil:
		return ""
	case *res.Met:
		return "met"
	}
	return "MISSED"
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// dist is a sample of durations.
type dist []time.Duration

// pct returns the nearest-rank percentile p (0 < p ≤ 100) in milliseconds.
func (d dist) pct(p float64) float64 {
	if len(d) == 0 {
		return math.NaN()
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	return ms(s[i])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ptr[T any](v T) *T { return &v }

// distResult fills a result's P50, P99 and Max from d, in ms.
func distResult(res result, d dist) result {
	res.N, res.Unit = len(d), "ms"
	res.P50, res.P99, res.Max = ptr(d.pct(50)), ptr(d.pct(99)), ptr(d.pct(100))
	return res
}

// stages turns named samples into breakdown rows.
func stages(bench, engine string, names []string, d []dist) []stage {
	out := make([]stage, len(names))
	for i, n := range names {
		out[i] = stage{Benchmark: bench, Engine: engine, Name: n, N: len(d[i]), P50: d[i].pct(50), P99: d[i].pct(99)}
	}
	return out
}
