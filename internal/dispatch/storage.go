package dispatch

import (
	"context"
	"fmt"
	"math"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/store"
)

// markerSeq is the seq of the line that marks a gap in a job's log. It is
// above any seq an agent uses, so the log store takes it after whatever
// the job stored, and nothing of the job is stored after it.
const markerSeq = math.MaxInt64

// unstored is a job whose output the orchestrator could not store: the
// disk under its logs or its database is full. Until the job is recorded
// as failed and the gap in its log is marked, nothing more of the job is
// applied or acknowledged: its agent keeps the messages, and the
// connection stays open (closing it would only make the agent reconnect
// and fail again, in a loop).
type unstored struct {
	agent   *Agent
	cause   string
	lost    int    // log lines not stored
	lastSeq uint64 // highest seq received from the agent
	ended   bool   // the failure is recorded
}

// storageFull handles a message of job jobID that could not be stored for
// lack of space: the first time, the agent is told to stop the job and
// the job is failed with the cause (retried by retryUnstored until the
// store takes it). It returns 0: nothing is acknowledged.
func (d *Dispatcher) storageFull(ctx context.Context, a *Agent, m protocol.Message, cause error) uint64 {
	jobID, seq := m.(protocol.JobScoped).JobSeq()
	d.mu.Lock()
	u, seen := d.unstored[jobID]
	if !seen {
		u = &unstored{agent: a, cause: cause.Error()}
		d.unstored[jobID] = u
	}
	u.lastSeq = max(u.lastSeq, seq)
	if chunk, ok := m.(*protocol.LogChunk); ok {
		u.lost += len(chunk.Lines)
	}
	d.mu.Unlock()
	if seen {
		return 0
	}
	d.log.Error("job output not stored: no space left; stopping the job", "job_id", jobID, "agent_id", a.ID, "error", cause)
	_ = a.conn.Send(ctx, &protocol.JobCancel{JobID: jobID, Force: true, Reason: "the orchestrator has no space left to store the job's output"})
	d.retryUnstored(ctx)
	return 0
}

// swallowUnstored reports whether a message belongs to a job whose output
// could not be stored and that is not settled yet; such messages are
// counted and dropped, not acknowledged.
func (d *Dispatcher) swallowUnstored(m protocol.Message) bool {
	jobID, seq := m.(protocol.JobScoped).JobSeq()
	d.mu.Lock()
	defer d.mu.Unlock()
	u, ok := d.unstored[jobID]
	if !ok {
		return false
	}
	u.lastSeq = max(u.lastSeq, seq)
	if chunk, ok := m.(*protocol.LogChunk); ok {
		u.lost += len(chunk.Lines)
	}
	return true
}

// retryUnstored tries again to settle each job whose output could not be
// stored: record its failure, then mark the gap in its log, then tell its
// agent that everything it sent is dealt with. Each step is retried at
// the next call until the disk has room again.
func (d *Dispatcher) retryUnstored(ctx context.Context) {
	d.settling.Lock()
	defer d.settling.Unlock()
	d.mu.Lock()
	ids := make([]string, 0, len(d.unstored))
	for id := range d.unstored {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	for _, jobID := range ids {
		d.mu.Lock()
		u := d.unstored[jobID]
		ended, cause := u.ended, u.cause
		d.mu.Unlock()
		if !ended {
			msg := fmt.Sprintf("output not stored: %s; free space in the orchestrator's data dir and re-run", cause)
			if err := d.failUnstored(ctx, jobID, msg); err != nil {
				continue
			}
			d.mu.Lock()
			u.ended = true
			d.mu.Unlock()
			d.log.Warn("job ended by the orchestrator", "job_id", jobID, "status", store.JobFailure, "reason", msg)
		}
		if err := d.markGap(ctx, jobID, u); err != nil {
			continue
		}
		d.mu.Lock()
		delete(d.unstored, jobID)
		lastSeq := u.lastSeq
		d.mu.Unlock()
		if lastSeq > 0 {
			_ = u.agent.conn.Send(ctx, &protocol.JobAckSeq{JobID: jobID, Seq: lastSeq})
		}
		u.agent.release(jobID)
		d.JobsQueued()
	}
}

// failUnstored ends the job with failure, in one transaction; a job that
// ended otherwise meanwhile is left as it is.
func (d *Dispatcher) failUnstored(ctx context.Context, jobID, msg string) error {
	var events []apiv1.Event
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		events = nil
		job, err := tx.GetJob(ctx, jobID)
		if err != nil {
			return err
		}
		ev, err := d.endJob(ctx, tx, job, store.JobFailure, msg)
		events = ev
		return err
	})
	if err != nil {
		return err
	}
	d.publish(events)
	return nil
}

// markGap writes the job-level line that says how much of the job's
// output is missing.
func (d *Dispatcher) markGap(ctx context.Context, jobID string, u *unstored) error {
	job, err := d.db.GetJobHead(ctx, jobID)
	if err != nil {
		return err
	}
	d.mu.Lock()
	lost := u.lost
	d.mu.Unlock()
	text := fmt.Sprintf("[kici] output of this job from here on was not stored (at least %d log lines lost): %s", lost, u.cause)
	return d.logs.AppendLog(ctx, job.RunID, job.ID, job.Attempt, -1, markerSeq, []protocol.LogLine{{TS: d.cfg.Now(), Text: text}})
}
