package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// The throughput targets, in jobs/s: the orchestrator's ceiling
// (protocol agents) on PostgreSQL, and real agents on SQLite.
const (
	throughputTarget     = 500.0
	realThroughputTarget = 250.0
)

// maxMatrix is the most jobs one run may get: workflow matrices are
// capped at 256 combinations.
const maxMatrix = 256

// benchThroughput pushes cfg.jobs one-step jobs through cfg.agents agents
// and reports jobs per second from the first trigger to the moment the
// last job's success event arrives on its run's SSE stream. With real set the agents are
// kici-agent processes (each job: archive download, extract, a bash
// process); otherwise in-process protocol agents that finish each job at
// once, which leaves the orchestrator and its database as the only cost.
func (h *harness) benchThroughput(ctx context.Context, engine string, real bool, width int) {
	sc := &scope{}
	defer sc.close()
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := h.throughput(ctx, engine, real, width, sc); err != nil {
		h.rep.fail("throughput", engine, err)
	}
}

func (h *harness) throughput(ctx context.Context, engine string, real bool, width int, sc *scope) error {
	dbURL, err := h.databaseURL(ctx, engine, sc)
	if err != nil {
		return err
	}
	o, err := h.startOrchestrator(ctx, sc, dbURL)
	if err != nil {
		return err
	}
	res, err := h.throughputOn(ctx, sc, o, engine, real, width)
	if err != nil {
		return err
	}
	first := width == h.cfg.widths[0]
	switch {
	case engine == enginePostgres && !real && first:
		res.Target = fmt.Sprintf("≥ %.0f jobs/s", throughputTarget)
		res.Met = ptr(*res.Value >= throughputTarget)
	case engine == engineSQLite && real && first:
		res.Target = fmt.Sprintf("≥ %.0f jobs/s", realThroughputTarget)
		res.Met = ptr(*res.Value >= realThroughputTarget)
	case !real:
		res.Target = "(orchestrator ceiling)"
	}
	h.rep.add(res)
	return nil
}

// throughputOn runs the throughput benchmark on a started orchestrator,
// with runs of width jobs, and returns its row (without a target).
func (h *harness) throughputOn(ctx context.Context, sc *scope, o *server, engine string, real bool, width int) (result, error) {
	var agentPIDs []int
	kind := fmt.Sprintf("%d kici-agents", h.cfg.agents)
	if real {
		for i := range h.cfg.agents {
			p, err := h.startAgent(ctx, sc, o, fmt.Sprintf("bench-agent-%d", i+1), false)
			if err != nil {
				return result{}, err
			}
			agentPIDs = append(agentPIDs, p.pid())
		}
	} else {
		kind = fmt.Sprintf("%d protocol agents", h.cfg.agents)
		for i := range h.cfg.agents {
			token, err := o.agentToken(ctx)
			if err != nil {
				return result{}, err
			}
			fa, err := dialFakeAgent(ctx, o.addr, token, fmt.Sprintf("bench-protocol-agent-%d", i+1), false)
			if err != nil {
				return result{}, err
			}
			sc.add(fa.close)
		}
	}
	if err := o.waitAgents(ctx, h.cfg.agents); err != nil {
		return result{}, err
	}

	size := min(h.cfg.jobs, width)
	triggers := (h.cfg.jobs + size - 1) / size
	total := size * triggers
	repo, err := makeRepo(ctx, h.dir("repo-wide"), map[string]string{"wide.yml": matrixWorkflow("wide", size)})
	if err != nil {
		return result{}, err
	}
	warm, err := makeRepo(ctx, h.dir("repo-warm"), map[string]string{"warm.yml": matrixWorkflow("warm", h.cfg.agents)})
	if err != nil {
		return result{}, err
	}
	if err := o.addSource(ctx, "wide", repo); err != nil {
		return result{}, err
	}
	if err := o.addSource(ctx, "warm", warm); err != nil {
		return result{}, err
	}
	// One job per agent first, so no agent pays its first job's costs in
	// the measurement.
	warmIDs, err := o.trigger(ctx, "warm", 1)
	if err != nil {
		return result{}, err
	}
	if _, _, err := o.waitJobs(ctx, warmIDs[0], h.cfg.agents); err != nil {
		return result{}, fmt.Errorf("warm-up run %s: %w; %s", warmIDs[0], err, h.diagnose(o, warmIDs[0]))
	}

	cpu0 := snapshotCPU(o.pid(), agentPIDs)
	start := time.Now()
	type end struct {
		id       string
		at       time.Time
		fellBack bool
		err      error
	}
	ends := make(chan end, triggers)
	var wg sync.WaitGroup
	var triggered time.Time
	for range triggers {
		ids, err := o.trigger(ctx, "wide", 1)
		if err != nil {
			return result{}, err
		}
		wg.Go(func() {
			at, fb, err := o.waitJobs(ctx, ids[0], size)
			ends <- end{ids[0], at, fb, err}
		})
	}
	triggered = time.Now()
	wg.Wait()
	close(ends)
	cpu1 := snapshotCPU(o.pid(), agentPIDs)
	last := start
	fellBack := 0
	var runIDs []string
	for e := range ends {
		if e.err != nil {
			return result{}, fmt.Errorf("run %s: %w; %s", e.id, e.err, h.diagnose(o, e.id))
		}
		if e.at.After(last) {
			last = e.at
		}
		if e.fellBack {
			fellBack++
		}
		runIDs = append(runIDs, e.id)
	}
	// Every job must have succeeded, and every run must end too (allowing
	// the runs a moment, together, after their last job).
	runs := map[string]apiv1.Run{}
	_ = poll(ctx, 3*time.Second, "runs end", func() bool {
		all := true
		for _, id := range append(runIDs, warmIDs[0]) {
			if r, ok := runs[id]; ok && terminal(r.Status) {
				continue
			}
			r, err := o.run(ctx, id)
			if err == nil {
				runs[id] = r
			}
			all = all && err == nil && terminal(r.Status)
		}
		return all
	})
	done, stuck := 0, 0
	for _, id := range append(runIDs, warmIDs[0]) {
		r, ok := runs[id]
		if !ok {
			return result{}, fmt.Errorf("run %s could not be read", id)
		}
		if id != warmIDs[0] {
			for _, j := range r.Jobs {
				if j.Status == "success" {
					done++
				}
			}
		}
		switch r.Status {
		case "success":
		case "running":
			stuck++
		default:
			return result{}, fmt.Errorf("run %s ended %s: %s", id, r.Status, r.Error)
		}
	}
	if done != total {
		return result{}, fmt.Errorf("%d of %d jobs succeeded", done, total)
	}
	elapsed := last.Sub(start)
	rate := float64(total) / elapsed.Seconds()
	res := result{
		Benchmark: "throughput", Name: fmt.Sprintf("throughput, %s, %d-job runs", kind, size), Engine: engine,
		N: total, Unit: "jobs/s", Value: ptr(rate),
	}
	notes := []string{
		fmt.Sprintf("%d jobs (%d runs of a %d-job matrix) in %s; the %d POST /trigger took %s",
			total, triggers, size, elapsed.Round(time.Millisecond), triggers, triggered.Sub(start).Round(time.Millisecond)),
		cpu1.sub(cpu0).per(total, "job", engine),
		fmt.Sprintf("other processes used %.0f%% of the machine", cpu1.sub(cpu0).neighbours(engine)),
	}
	if stuck > 0 {
		notes = append(notes, fmt.Sprintf("BUG: %d of %d runs (the warm-up included) stayed running after all their jobs succeeded", stuck, triggers+1))
		h.rep.Bugs = append(h.rep.Bugs, fmt.Sprintf("throughput (%s, %s): %d of %d runs stayed \"running\" although every job had succeeded", engine, kind, stuck, triggers+1))
	}
	if fellBack > 0 {
		notes = append(notes, fmt.Sprintf("%d runs' ends were found by polling after their SSE stream lagged", fellBack))
	}
	res.Note = strings.Join(notes, "; ")
	return res, nil
}

// diagnose describes a stuck run for the error message: its jobs by
// status, the queue by status, the agents and their busy jobs. With -keep
// it also sends SIGQUIT to the orchestrator, whose goroutine dump then
// ends its log.
func (h *harness) diagnose(o *server, runID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	if r, err := o.run(ctx, runID); err == nil {
		by := map[string]int{}
		for _, j := range r.Jobs {
			by[j.Status]++
		}
		fmt.Fprintf(&b, "run %s: %v; ", r.Status, by)
	}
	if q, err := o.queue(ctx); err == nil {
		by := map[string]int{}
		for _, e := range q {
			by[e.Status]++
		}
		fmt.Fprintf(&b, "queue %v; ", by)
	}
	if list, err := o.agents(ctx); err == nil {
		for _, a := range list {
			fmt.Fprintf(&b, "agent %s busy %v; ", a.ID, a.BusyJobs)
		}
	}
	if h.cfg.keep && o.proc != nil {
		_ = o.proc.cmd.Process.Signal(syscall.SIGQUIT)
		fmt.Fprintf(&b, "goroutine dump at the end of %s", o.proc.logPath)
	}
	return b.String()
}
