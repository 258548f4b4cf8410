package main

import (
	"context"
	"fmt"
	"time"
)

// latencyTarget is the target for the median on SQLite.
const latencyTarget = 25 * time.Millisecond

// sample is one measured trigger-to-success run.
type sample struct {
	runID string
	start time.Time // before POST /trigger was sent
	resp  time.Time // when its response was read
	end   time.Time // when the SSE stream said success
}

// benchLatency measures POST /trigger → run success (seen on the run's SSE
// stream) of a one-step `run: "true"` workflow with one kici-agent, over
// sequential runs, and breaks the time down from the processes' logs.
func (h *harness) benchLatency(ctx context.Context, engine string) {
	sc := &scope{}
	defer sc.close()
	if err := h.latency(ctx, engine, sc); err != nil {
		h.rep.fail("latency", engine, err)
	}
}

func (h *harness) latency(ctx context.Context, engine string, sc *scope) error {
	dbURL, err := h.databaseURL(ctx, engine, sc)
	if err != nil {
		return err
	}
	o, err := h.startOrchestrator(ctx, sc, dbURL)
	if err != nil {
		return err
	}
	agent, err := h.startAgent(ctx, sc, o, "bench-agent", true)
	if err != nil {
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
	cpu0 := snapshotCPU(o.pid(), []int{agent.pid()})
	samples, fellBack, err := h.latencyLoop(ctx, o.client, 0, h.cfg.runs)
	if err != nil {
		return err
	}
	cpu := snapshotCPU(o.pid(), []int{agent.pid()}).sub(cpu0)

	total := make(dist, len(samples))
	respond := make(dist, len(samples))
	for i, s := range samples {
		total[i] = s.end.Sub(s.start)
		respond[i] = s.resp.Sub(s.start)
	}
	res := distResult(result{
		Benchmark: "latency", Name: "trigger → success, 1 agent", Engine: engine,
		Target: "p50 ≤ 25 ms",
	}, total)
	res.Met = ptr(*res.P50 <= ms(latencyTarget))
	if engine != engineSQLite {
		res.Target = "(p50 ≤ 25 ms on SQLite)"
		res.Met = nil
	}
	res.Note = fmt.Sprintf("%s; other processes used %.0f%% of the machine",
		cpu.per(len(samples), "run", engine), cpu.neighbours(engine))
	if fellBack > 0 {
		res.Note += fmt.Sprintf("; %d runs were read by polling after the SSE stream lagged or ended early", fellBack)
	}
	h.rep.add(res)
	h.rep.add(distResult(result{Benchmark: "latency", Name: "  of which POST /trigger answered", Engine: engine}, respond))

	// What the processes weigh after the runs (no target).
	if rss, err := readRSS(o.proc.pid()); err == nil {
		h.rep.add(result{Benchmark: "rss", Name: fmt.Sprintf("orchestrator RSS after %d runs", len(samples)+h.cfg.warmup), Engine: engine, Unit: "MB", Value: ptr(rss)})
	}
	if rss, err := readRSS(agent.pid()); err == nil {
		h.rep.add(result{Benchmark: "rss", Name: fmt.Sprintf("agent RSS after %d jobs", len(samples)+h.cfg.warmup), Engine: engine, Unit: "MB", Value: ptr(rss)})
	}

	stages, err := breakdown(ctx, o.client, o.proc.logPath, agent.logPath, samples)
	if err != nil {
		h.rep.fail("latency breakdown", engine, err)
		return nil
	}
	for i := range stages {
		stages[i].Engine = engine
	}
	h.rep.Breakdown = append(h.rep.Breakdown, stages...)
	return nil
}

// latencyLoop runs warmup unmeasured and then runs measured sequential
// trigger-to-success runs of source "trivial". fellBack counts the runs
// whose end was found by polling.
func (h *harness) latencyLoop(ctx context.Context, c *client, warmup, runs int) ([]sample, int, error) {
	samples := make([]sample, 0, runs)
	fellBack := 0
	for i := range warmup + runs {
		s, fb, err := oneRun(ctx, c)
		if err != nil {
			return nil, 0, fmt.Errorf("run %d: %w", i+1, err)
		}
		if i < warmup {
			continue
		}
		samples = append(samples, s)
		if fb {
			fellBack++
		}
	}
	return samples, fellBack, nil
}

func oneRun(ctx context.Context, c *client) (sample, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s := sample{start: time.Now()}
	ids, err := c.trigger(ctx, "trivial", 1)
	if err != nil {
		return s, false, err
	}
	s.resp, s.runID = time.Now(), ids[0]
	status, end, fellBack, err := c.waitRun(ctx, s.runID)
	if err != nil {
		return s, false, err
	}
	if status != "success" {
		r, _ := c.run(ctx, s.runID)
		return s, false, fmt.Errorf("run %s ended %s: %s %+v", s.runID, status, r.Error, r.Jobs)
	}
	s.end = end
	return s, fellBack, nil
}
