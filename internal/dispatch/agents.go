package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// ErrNotOwner is returned by Apply for a job-scoped message about a job
// that is not dispatched to the sending connection: the agent must not
// speak for another agent's job. Nothing of the message is applied, and it
// is not acknowledged; the connection may stay open (protocol error code
// not_owner).
var ErrNotOwner = errors.New("job is not dispatched to this agent")

// Register adds a connected agent and answers its registration: for each
// in-flight job the agent reports that is still its own, the highest
// message seq already applied, so the agent replays only the rest. A job
// it no longer owns is left out, which tells the agent to drop it. An
// older connection of the same agent is closed.
//
// scalerToken is the single-use token a scaler-spawned agent presented
// ("" for any other agent). An agent whose id says it was spawned by a
// scaler, but which the scaler manager does not know, is refused with a
// *RefusedError (close code 4040).
//
// An agent id belongs to the credential (a.Credential) that registered it
// for as long as that agent is connected or holds a job. A registration of
// the id under another credential is refused with a *RefusedError (close
// code 4013) before anything changes: the connected agent keeps its
// connection and its jobs.
func (d *Dispatcher) Register(ctx context.Context, a *Agent, inFlight []protocol.InFlightJob, scalerToken string) (*protocol.Registered, error) {
	unlock := d.ids.lock(a.ID)
	defer unlock()
	if err := d.bindIdentity(ctx, a); err != nil {
		return nil, err
	}
	if err := d.registerScaled(a, scalerToken); err != nil {
		return nil, err
	}
	if _, drained := d.drainOf(a.ID); drained {
		a.setDraining(true)
	}
	if old := d.reg.get(a.ID); old != nil && old != a {
		// The older connection may still look alive: a half-open TCP
		// connection after the agent's host rebooted is only noticed at
		// the next heartbeat timeout, long after the agent is back. Its
		// jobs are held as if it had disconnected, so those the agent does
		// not report below are settled now instead of staying "running"
		// with nobody to end them.
		old.retire()
		deadline := d.cfg.Now().Add(d.cfg.RecoveryWindow)
		for _, jobID := range old.BusyJobs() {
			if _, err := d.db.SetRecovery(ctx, d.cfg.Instance, jobID, a.ID, deadline); err != nil {
				return nil, fmt.Errorf("hold job %q of the replaced connection of agent %q: %w", jobID, a.ID, err)
			}
		}
	}
	reply := &protocol.Registered{AgentID: a.ID, HeartbeatIntervalMS: d.cfg.HeartbeatInterval.Milliseconds(), ServerVersion: "kici"}
	for _, f := range inFlight {
		job, err := d.db.GetJob(ctx, f.JobID)
		if err != nil {
			continue
		}
		if job.AgentID != a.ID || (job.Status != store.JobDispatched && job.Status != store.JobRunning) {
			continue
		}
		// The row becomes this instance's, whichever instance dispatched
		// it (the agent may have moved here from another coordinator),
		// and stops waiting for the agent. A job the recovery sweep ended
		// meanwhile has no row left: it is not the agent's any more.
		reclaimed, err := d.db.Reclaim(ctx, d.cfg.Instance, job.ID, a.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("reclaim job %q for agent %q: %w", job.ID, a.ID, err)
		}
		if !reclaimed {
			continue
		}
		a.take(job.ID)
		d.setAttempt(job.ID, job.Attempt)
		reply.Resume = append(reply.Resume, protocol.ResumeJob{JobID: job.ID, AckSeq: uint64(job.LastSeq)})
	}
	if err := d.reconcileMissing(ctx, a, inFlight); err != nil {
		return nil, err
	}
	if old := d.reg.add(a); old != nil && old != a {
		old.retire()
		old.conn.Close(protocol.CloseReplaced, "replaced by a newer connection of the same agent")
	}
	d.log.Info("agent registered", "agent_id", a.ID, "labels", a.Labels, "resumed_jobs", len(reply.Resume))
	d.JobsQueued()
	return reply, nil
}

// bindIdentity binds a.ID to a.Credential, or refuses the registration if
// the id belongs to another credential whose agent is connected or holds a
// job.
func (d *Dispatcher) bindIdentity(ctx context.Context, a *Agent) error {
	refuse := func(holder string) error {
		d.log.Warn("agent id taken by another credential", "agent_id", a.ID, "credential", a.Credential, "bound_to", holder)
		return &RefusedError{Code: protocol.CloseIdentityTaken, Reason: fmt.Sprintf(
			"agent id %q belongs to another agent token while it is connected or holds a job", a.ID)}
	}
	if old := d.reg.get(a.ID); old != nil && old != a && old.Credential != a.Credential {
		return refuse(old.Credential)
	}
	if !strings.HasPrefix(a.Credential, "token:") {
		// A scaler agent's id is bound to its single-use token by the
		// scaler manager; without agent auth there is one credential.
		return nil
	}
	var holder string
	var ok bool
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		holder, ok, err = tx.BindAgent(ctx, a.ID, a.Credential)
		return err
	})
	if err != nil {
		return fmt.Errorf("bind agent %q to its credential: %w", a.ID, err)
	}
	if !ok {
		return refuse(holder)
	}
	return nil
}

// reconcileMissing settles the jobs still waiting for agent a to come
// back that a did not report in flight: it restarted or never received
// them, so waiting out the recovery window would only delay the verdict.
// A job it never acknowledged goes back to the queue (attempts count); a
// job it had started fails as lost.
func (d *Dispatcher) reconcileMissing(ctx context.Context, a *Agent, inFlight []protocol.InFlightJob) error {
	rows, err := d.db.ListRecovering(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("reconcile jobs of agent %q: %w", a.ID, err)
	}
	for _, r := range rows {
		if slices.ContainsFunc(inFlight, func(f protocol.InFlightJob) bool { return f.JobID == r.JobID }) {
			continue
		}
		if r.AckDeadline != nil {
			d.requeue(ctx, store.RequeueRequest{JobID: r.JobID, AgentID: a.ID, OnlyUnacked: true, OnlyRecovering: true,
				Reason: fmt.Sprintf("agent %s reconnected without the job it had not acknowledged", a.ID)}, 0)
			continue
		}
		d.failJobByID(ctx, r.JobID,
			fmt.Sprintf("agent lost: agent %s reconnected without the job it was running (it restarted or dropped it)", a.ID),
			workflow.RetryAgentLost)
	}
	return nil
}

// Unregister removes a disconnected agent. Its jobs wait RecoveryWindow
// for the agent to come back and reclaim them, then fail as "agent lost"
// (or go back to the queue, for a dispatch never acknowledged). A dispatch
// not yet acknowledged waits too: the agent may have accepted it and be
// running it, with only its ack lost, so handing it to another agent at
// once could run its steps twice. The agent's reconnect settles the
// question at once (see reconcileMissing). A scaler-spawned agent never
// comes back (its compute is destroyed below), so its jobs are settled at
// once: requeued if unacknowledged, failed as lost if started.
func (d *Dispatcher) Unregister(ctx context.Context, a *Agent) {
	if !d.reg.remove(a) {
		return // a newer connection took over; its jobs are its own
	}
	busy := a.BusyJobs()
	// A worker's scaler agent that left mid-job may be reconnecting
	// through its worker (to this coordinator or another): its compute is
	// kept, and the worker hears of it once the agent leaves idle.
	if d.scaler != nil && !(a.remote && len(busy) > 0) {
		defer d.scaler.OnAgentDisconnected(a.ID)
	}
	deadline := d.cfg.Now().Add(d.cfg.RecoveryWindow)
	waiting, elsewhere := 0, 0
	for _, jobID := range busy {
		entry, err := d.db.GetQueueEntry(ctx, jobID)
		if err != nil {
			continue
		}
		if a.managed && !a.remote {
			// Its compute is destroyed below: it will not come back, so
			// waiting out the recovery window would only delay the verdict.
			// A job it never acknowledged goes back to the queue. One it
			// acknowledged may have started a step (every message the agent
			// sent before it died was applied before this runs), so it is
			// not run again: it fails as lost.
			if job, err := d.db.GetJobHead(ctx, jobID); err == nil && job.Status == store.JobDispatched && entry.AgentID == a.ID && entry.AckDeadline != nil {
				d.requeue(ctx, store.RequeueRequest{JobID: jobID, AgentID: a.ID,
					Reason: fmt.Sprintf("scaler agent %s disconnected before it acknowledged the job", a.ID)}, job.Attempt)
			} else {
				d.failJobByID(ctx, jobID, fmt.Sprintf(
					"agent lost: scaler agent %s disconnected mid-job; scaler agents are single-use, so its compute was destroyed", a.ID),
					workflow.RetryAgentLost)
			}
			continue
		}
		ok, err := d.db.SetRecovery(ctx, d.cfg.Instance, jobID, a.ID, deadline)
		if err != nil {
			d.log.Error("set recovery window failed", "job_id", jobID, "agent_id", a.ID, "error", err)
			continue
		}
		if ok {
			waiting++
		} else {
			elsewhere++ // the agent reclaimed it on another instance
		}
	}
	// An agent that moved to another instance with its jobs keeps its id
	// bound there.
	if waiting == 0 && elsewhere == 0 && strings.HasPrefix(a.Credential, "token:") {
		unlock := d.ids.lock(a.ID)
		if d.reg.get(a.ID) == nil { // not registered again meanwhile
			if err := d.db.UnbindAgent(ctx, a.ID, a.Credential); err != nil {
				d.log.Warn("unbind agent id failed", "agent_id", a.ID, "error", err)
			}
		}
		unlock()
	}
	d.log.Info("agent disconnected", "agent_id", a.ID, "jobs_waiting_for_recovery", waiting)
	d.JobsQueued()
}

// Cancel cancels every unfinished job of a run: jobs not on an agent
// (waiting, queued, or on an agent that is gone) end cancelled at once, all
// in one transaction, so no waiting job is skipped because an upstream was
// cancelled first; agents running one are told to stop it (force skips the
// grace period) and report the end themselves. A job whose agent is held
// by another live instance gets a cancel request on its queue row, which
// that instance sends on. It returns the run as the
// cancel left it, read in the same transaction: once the run has ended,
// retention may delete it at any moment, so a read after the commit could
// find nothing.
func (d *Dispatcher) Cancel(ctx context.Context, runID string, force bool, reason string) (store.Run, error) {
	var toAgents []store.Job
	var events []apiv1.Event
	var after store.Run
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		toAgents, events = nil, nil
		run, err := tx.GetRun(ctx, runID)
		if err != nil {
			return err
		}
		for _, j := range run.Jobs {
			if runstate.JobTerminal(j.Status) {
				continue
			}
			if j.Status == store.JobDispatched || j.Status == store.JobRunning {
				if a := d.reg.get(j.AgentID); a != nil && a.holds(j.ID) {
					// Recorded on its row too, so that the job is not
					// retried whatever its agent reports, or if it is lost.
					if err := d.noteCancelSent(ctx, tx, j.ID, force, reason); err != nil {
						return err
					}
					toAgents = append(toAgents, j)
					continue
				}
				// Its agent may be connected to another live instance,
				// which then tells it (see sendCancelRequests).
				elsewhere, err := d.requestCancelElsewhere(ctx, tx, j.ID, force, reason)
				if err != nil {
					return err
				}
				if elsewhere {
					continue
				}
			}
			ev, err := d.endJobOnly(ctx, tx, j, store.JobCancelled, reason)
			if err != nil {
				return err
			}
			events = append(events, ev...)
		}
		more, err := d.sched.AdvanceTx(ctx, tx, runID)
		events = append(events, more...)
		if err != nil {
			return err
		}
		after, err = tx.GetRun(ctx, runID)
		return err
	})
	if err != nil {
		return store.Run{}, err
	}
	d.publish(events)
	for _, j := range toAgents {
		a := d.reg.get(j.AgentID)
		if a != nil && a.conn.Send(ctx, &protocol.JobCancel{JobID: j.ID, Force: force, Reason: reason}) == nil {
			continue
		}
		d.endJobByID(ctx, j.ID, store.JobCancelled, reason)
	}
	return after, nil
}

// Apply applies one job-scoped message from an agent exactly once and
// returns the seq the agent may now forget (0: nothing to acknowledge).
func (d *Dispatcher) Apply(ctx context.Context, a *Agent, m protocol.Message) (uint64, error) {
	js, ok := m.(protocol.JobScoped)
	if !ok {
		return 0, fmt.Errorf("message %s is not job-scoped", m.Type())
	}
	jobID, seq := js.JobSeq()
	if d.swallowUnstored(m) {
		return 0, nil // its job is being failed for lack of space
	}
	if chunk, ok := m.(*protocol.LogChunk); ok {
		err := d.applyLog(ctx, a, chunk)
		if store.IsStorageFull(err) {
			// The disk is full: retrying (or closing, so that the agent
			// replays) would fail forever and leave the job running. The
			// log store truncated the partial write, so the stored log
			// stays readable.
			return d.storageFull(ctx, a, m, err), nil
		}
		if err != nil {
			return 0, err
		}
		return seq, nil
	}
	var events []apiv1.Event
	var freed, foreign bool
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		events, freed, foreign = nil, false, false
		job, err := tx.GetJobHead(ctx, jobID)
		if err != nil {
			return err
		}
		if !owns(a, job) {
			foreign = true
			return nil
		}
		if runstate.JobTerminal(job.Status) && !a.holds(jobID) {
			return nil // a replay after the end: nothing left to apply
		}
		fresh, err := tx.ApplyJobMessage(ctx, jobID, int64(seq))
		if err != nil || !fresh {
			return err
		}
		events, freed, err = d.applyTx(ctx, tx, a, job, m, a.wasAcked(jobID))
		return err
	})
	if store.IsStorageFull(err) {
		return d.storageFull(ctx, a, m, err), nil
	}
	if err != nil {
		return 0, fmt.Errorf("apply %s of job %q from agent %q: %w", m.Type(), jobID, a.ID, err)
	}
	if foreign {
		return 0, fmt.Errorf("%s of job %q from agent %q: %w", m.Type(), jobID, a.ID, ErrNotOwner)
	}
	d.publish(events)
	if freed {
		a.release(jobID)
		d.JobsQueued()
	}
	return seq, nil
}

// applyTx applies one message of job in tx. acked says that the job's
// job.ack from a's connection is applied (committed, or earlier in tx).
func (d *Dispatcher) applyTx(ctx context.Context, tx *store.Tx, a *Agent, job store.Job, m protocol.Message, acked bool) ([]apiv1.Event, bool, error) {
	now := d.cfg.Now()
	switch m := m.(type) {
	case *protocol.JobAck:
		_, err := tx.Ack(ctx, job.ID, a.ID)
		return nil, false, err
	case *protocol.JobReject:
		events, _, err := d.requeueTx(ctx, tx, store.RequeueRequest{JobID: job.ID, AgentID: a.ID,
			Reason: fmt.Sprintf("agent %s rejected the job: %s", a.ID, m.Reason)})
		return events, true, err
	case *protocol.JobStatus:
		return d.applyJobStatus(ctx, tx, job, m, now, acked)
	case *protocol.StepStatus:
		to := store.StepStatus(m.Status)
		t := store.StepTransition{JobID: job.ID, Index: m.Step, From: runstate.StepFrom(to), To: to}
		if runstate.StepTerminal(to) {
			code := m.ExitCode
			t.ExitCode, t.Error = &code, &m.Error
			t.FinishedAt = timeOr(m.FinishedAt, now)
		} else {
			t.StartedAt = timeOr(m.StartedAt, now)
		}
		changed, err := tx.UpdateStepStatus(ctx, t)
		if err != nil || !changed {
			return nil, false, err
		}
		idx := m.Step
		return []apiv1.Event{{Kind: "step", RunID: job.RunID, Job: job.Name, JobID: job.ID, Step: &idx, Status: m.Status, Error: m.Error}}, false, nil
	}
	return nil, false, fmt.Errorf("unexpected message %s", m.Type())
}

func (d *Dispatcher) applyJobStatus(ctx context.Context, tx *store.Tx, job store.Job, m *protocol.JobStatus, now time.Time, acked bool) ([]apiv1.Event, bool, error) {
	to := store.JobStatus(m.Status)
	if to == store.JobRunning {
		// A running report also acknowledges the dispatch, unless its
		// job.ack already did.
		if !acked {
			if _, err := tx.Ack(ctx, job.ID, job.AgentID); err != nil {
				return nil, false, err
			}
		}
		changed, err := tx.UpdateJobStatus(ctx, store.JobTransition{ID: job.ID, From: runstate.JobFrom(to), To: to, StartedAt: &now})
		if err != nil || !changed {
			return nil, false, err
		}
		events := []apiv1.Event{{Kind: "job", RunID: job.RunID, Job: job.Name, JobID: job.ID, Status: m.Status}}
		if d.runStarted(job.RunID) {
			return events, false, nil // a job of the run started before: nothing to start
		}
		started, err := tx.UpdateRunStatus(ctx, store.RunTransition{ID: job.RunID, From: runstate.RunFrom(store.RunRunning), To: store.RunRunning, StartedAt: &now})
		if err != nil {
			return nil, false, err
		}
		if started {
			events = append(events, apiv1.Event{Kind: "run", RunID: job.RunID, Status: string(store.RunRunning)})
			// A run's jobs are created with it, so the job's creation
			// time is the run's.
			took := max(now.Sub(job.CreatedAt), 0)
			d.noteOnPublish(job.ID, m.Status, func() { d.cfg.Observer.TimeToStart(took) })
		}
		return events, false, nil
	}
	events, err := d.endJobCause(ctx, tx, job, to, m.Error, agentCause(job, m))
	return events, true, err
}

// owns reports whether connection a may speak for job: the job is
// dispatched to a's agent id and, unless it has ended, to this very
// connection (a connection refused or replaced holds none of its jobs).
func owns(a *Agent, job store.Job) bool {
	if job.AgentID != a.ID {
		return false
	}
	return a.holds(job.ID) || runstate.JobTerminal(job.Status)
}

// applyLog stores a log chunk; the log store itself skips a chunk it has.
func (d *Dispatcher) applyLog(ctx context.Context, a *Agent, m *protocol.LogChunk) error {
	job, keep, err := d.checkChunk(ctx, a, m)
	if err != nil || !keep {
		return err
	}
	return d.logs.AppendLog(ctx, job.RunID, job.ID, job.Attempt, m.Step, m.Seq, m.Lines)
}

// checkChunk reads the job of a log chunk from a and says whether to store
// the chunk (see storeChunk); a chunk about a job that is not a's gives an
// ErrNotOwner error. The chunk is counted as received.
func (d *Dispatcher) checkChunk(ctx context.Context, a *Agent, m *protocol.LogChunk) (store.Job, bool, error) {
	job, err := d.db.GetJobHead(ctx, m.JobID)
	if err != nil {
		return store.Job{}, false, err
	}
	if !owns(a, job) {
		return store.Job{}, false, fmt.Errorf("log.chunk of job %q from agent %q: %w", m.JobID, a.ID, ErrNotOwner)
	}
	d.cfg.Observer.LogChunkReceived()
	return job, storeChunk(job, m), nil
}

func timeOr(t, def time.Time) *time.Time {
	if t.IsZero() {
		return &def
	}
	return &t
}
