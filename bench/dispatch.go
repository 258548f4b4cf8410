package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// dispatchTarget is the target for the p50.
const dispatchTarget = time.Millisecond

// dispatchSample is one measured dispatch.
type dispatchSample struct {
	runID, jobID string
	enqueued     time.Time // the queue row's enqueued_at (orchestrator clock, µs)
	resp         time.Time // when the trigger's HTTP response was read
	read         time.Time // when the job.dispatch frame was read
}

// benchDispatch measures enqueue → the agent has the job.dispatch frame:
// from the enqueued_at the orchestrator writes into the job's queue row
// (its wall clock, microseconds, taken inside the transaction that creates
// the run) to the moment a protocol agent in this process read the frame
// (this process's wall clock; same machine, same clock). The fake agent
// holds each job until its queue row has been read, then finishes it.
func (h *harness) benchDispatch(ctx context.Context, engine string) {
	sc := &scope{}
	defer sc.close()
	if err := h.dispatch(ctx, engine, sc); err != nil {
		h.rep.fail("dispatch", engine, err)
	}
}

func (h *harness) dispatch(ctx context.Context, engine string, sc *scope) error {
	dbURL, err := h.databaseURL(ctx, engine, sc)
	if err != nil {
		return err
	}
	o, err := h.startOrchestrator(ctx, sc, dbURL)
	if err != nil {
		return err
	}
	token, err := o.agentToken(ctx)
	if err != nil {
		return err
	}
	fa, err := dialFakeAgent(ctx, o.addr, token, "bench-protocol-agent", true)
	if err != nil {
		return err
	}
	sc.add(fa.close)
	repo, err := makeRepo(ctx, h.dir("repo-trivial"), map[string]string{"trivial.yml": trivialWorkflow})
	if err != nil {
		return err
	}
	if err := o.addSource(ctx, "trivial", repo); err != nil {
		return err
	}

	var samples []dispatchSample
	var cpu0 cpuSnapshot
	for i := range h.cfg.warmup + h.cfg.dispatchRuns {
		if i == h.cfg.warmup {
			cpu0 = snapshotCPU(o.pid(), nil)
		}
		s, err := oneDispatch(ctx, o.client, fa.held, fa.done, fa.failure)
		if err != nil {
			return fmt.Errorf("dispatch %d: %w", i+1, err)
		}
		if i >= h.cfg.warmup {
			samples = append(samples, s)
		}
	}
	cpu := snapshotCPU(o.pid(), nil).sub(cpu0)
	total := make(dist, len(samples))
	early := 0
	for i, s := range samples {
		total[i] = s.read.Sub(s.enqueued)
		if s.read.Before(s.resp) {
			early++
		}
	}
	res := distResult(result{
		Benchmark: "dispatch", Name: "enqueue → agent has job.dispatch", Engine: engine,
		Target: "p50 ≤ 1 ms",
	}, total)
	res.Met = ptr(*res.P50 <= ms(dispatchTarget))
	res.Note = fmt.Sprintf("the frame was read before the trigger's HTTP response in %d of %d runs; other processes used %.0f%% of the machine",
		early, len(samples), cpu.neighbours(engine))
	h.rep.add(res)

	if engine == engineSQLite {
		// The floor under any commit on this disk: SQLite runs with
		// synchronous=FULL, so each commit waits for one such sync.
		if d, err := fsyncFloor(h.dir("fsync"), 200); err == nil {
			h.rep.add(distResult(result{Benchmark: "dispatch", Name: "  floor: write 4 KiB + fsync, data dir's disk", Engine: engine}, d))
		}
	}

	olog, err := readLog(o.proc.logPath, "run created", "job dispatched")
	if err != nil {
		h.rep.fail("dispatch breakdown", engine, err)
		return nil
	}
	names := []string{
		"enqueued_at (in the run's transaction) → \"run created\" logged (rest of the transaction, commit)",
		"\"run created\" → \"job dispatched\" logged (wake, claim transaction, build, send)",
		"\"job dispatched\" logged → frame read by the agent",
		"total",
	}
	d := make([]dist, len(names))
	for _, s := range samples {
		created, ok1 := olog["run created"][s.runID]
		sent, ok2 := olog["job dispatched"][s.jobID]
		if !ok1 || !ok2 {
			h.rep.fail("dispatch breakdown", engine, fmt.Errorf("run %s: a log line is missing", s.runID))
			return nil
		}
		for i, p := range []time.Duration{created.Sub(s.enqueued), sent.Sub(created), s.read.Sub(sent), s.read.Sub(s.enqueued)} {
			d[i] = append(d[i], p)
		}
	}
	h.rep.Breakdown = append(h.rep.Breakdown, stages("dispatch", engine, names, d)...)
	return nil
}

// oneDispatch triggers a run, waits for its dispatch on held, reads the
// job's queue row, and has the agent that got it finish the job. done
// closes when an agent's connection ends, failure says why.
func oneDispatch(ctx context.Context, c *client, held <-chan dispatched, done <-chan struct{}, failure func() error) (dispatchSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ids, err := c.trigger(ctx, "trivial", 1)
	if err != nil {
		return dispatchSample{}, err
	}
	s := dispatchSample{runID: ids[0], resp: time.Now()}
	var got dispatched
	select {
	case got = <-held:
	case <-done:
		return s, fmt.Errorf("agent connection ended: %v", failure())
	case <-ctx.Done():
		return s, fmt.Errorf("no dispatch of run %s: %w", s.runID, ctx.Err())
	}
	if got.msg.RunID != s.runID {
		return s, fmt.Errorf("got a dispatch of run %s, want run %s", got.msg.RunID, s.runID)
	}
	s.jobID, s.read = got.msg.JobID, got.at
	q, err := c.queue(ctx)
	if err != nil {
		return s, err
	}
	for _, e := range q {
		if e.JobID == s.jobID {
			s.enqueued = e.Enqueued
		}
	}
	if s.enqueued.IsZero() {
		return s, fmt.Errorf("job %s is not in the queue while dispatched", s.jobID)
	}
	if err := got.agent.finish(ctx, got.msg); err != nil {
		return s, err
	}
	status, _, _, err := c.waitRun(ctx, s.runID)
	if err != nil {
		return s, err
	}
	if status != "success" {
		return s, fmt.Errorf("run %s ended %s", s.runID, status)
	}
	return s, nil
}

// fsyncFloor times n rounds of writing 4 KiB to a file in dir and syncing
// it.
func fsyncFloor(dir string, n int) (dist, error) {
	f, err := os.Create(filepath.Join(dir, "fsync-test"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	d := make(dist, 0, n)
	for range n {
		start := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		d = append(d, time.Since(start))
	}
	return d, nil
}
