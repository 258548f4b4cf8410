package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// MaxAttempts is how many dispatches a job gets: the fifth requeue fails
// it for good.
const MaxAttempts = 5

// Config tunes the dispatcher. Durations must be positive.
type Config struct {
	// Instance is the id of the orchestrator instance this dispatcher
	// runs in: the queue rows it dispatches are recorded as its own, and
	// its ack and recovery sweeps act on its own rows alone. Empty means a
	// random id, for a dispatcher alone on its database.
	Instance string
	// AckTimeout is how long an agent has to ack a dispatch.
	AckTimeout time.Duration
	// RecoveryWindow is how long a job waits for its disconnected agent.
	RecoveryWindow time.Duration
	// QueueSweepInterval is how often expired queue rows are failed (by
	// RunSingletonSweeps).
	QueueSweepInterval time.Duration
	// DefaultJobTimeout bounds a job whose workflow sets no timeout.
	DefaultJobTimeout time.Duration
	// HeartbeatInterval is what agents are told to use.
	HeartbeatInterval time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Observer records phase timings; nil records nothing.
	Observer Observer
}

// Observer records the dispatcher's phase timings (a *metrics.Registry).
// Each is recorded once, after the transaction that made it true committed.
type Observer interface {
	// QueueWait is a job's time from enqueueing to dispatch.
	QueueWait(d time.Duration)
	// TimeToStart is a run's time from creation to its first job running.
	TimeToStart(d time.Duration)
	// JobDuration is a started job's time from running to its end.
	JobDuration(status string, d time.Duration)
	// LogChunkReceived is a log chunk received from its job's agent.
	LogChunkReceived()
}

type noObserver struct{}

func (noObserver) QueueWait(time.Duration)           {}
func (noObserver) TimeToStart(time.Duration)         {}
func (noObserver) JobDuration(string, time.Duration) {}
func (noObserver) LogChunkReceived()                 {}

// agentKey is the context key of the *Agent a dispatch is built for.
type agentKey struct{}

// AgentSupports reports whether the agent a dispatch is being built for
// announced feature (a protocol.Feature* name) when it registered. ctx is
// the one the Dispatcher passes to BuildDispatch; any other ctx supports
// nothing.
func AgentSupports(ctx context.Context, feature string) bool {
	a, _ := ctx.Value(agentKey{}).(*Agent)
	return a != nil && slices.Contains(a.Features, feature)
}

// DispatchBuilder fills in what a dispatch carries beyond the job itself:
// where the code comes from, run metadata, the job token, secrets. Its ctx
// tells what the receiving agent supports ([AgentSupports]). An
// *UnrunnableError fails the job at once; any other error sends it back
// to the queue.
type DispatchBuilder interface {
	BuildDispatch(ctx context.Context, run store.Run, job store.Job, attempt int) (*protocol.JobDispatch, error)
}

// UnrunnableError is a dispatch that can never succeed, such as a job
// declaring a secret that is not set: the job fails with Reason instead of
// going back to the queue.
type UnrunnableError struct {
	Reason string
}

func (e *UnrunnableError) Error() string { return e.Reason }

// LogSink stores the log chunks agents send. Storing must be idempotent by
// (job, attempt, seq).
type LogSink interface {
	AppendLog(ctx context.Context, runID, jobID string, attempt, step int, seq uint64, lines []protocol.LogLine) error
}

// logPreparer is a LogSink that can make a job's log directories durable
// ahead of its first chunk (see logs.Store.Prepare): the dispatcher asks
// it while the agent starts the job, so the first chunk's
// acknowledgement does not wait for those syncs.
type logPreparer interface {
	PrepareLog(ctx context.Context, runID, jobID string) error
}

// Dispatcher matches queued jobs with agents and applies agent reports.
type Dispatcher struct {
	log   *slog.Logger
	db    *store.DB
	sched *scheduler.Scheduler
	build DispatchBuilder
	logs  LogSink
	cfg   Config
	reg   registry
	// bg tracks the work a dispatch leaves running: log preparations (see
	// logPreparer) and the sends of claims made in a run's transaction
	// (see pendingClaims.Send).
	bg   sync.WaitGroup
	ids  idLocks // one registration per agent id at a time
	kick chan struct{}

	// recent remembers the agent each job was last dispatched to and the
	// attempt, for log routing; refreshed from the store when missing.
	mu      sync.Mutex
	attempt map[string]int
	scaler  Scaler
	scaled  map[string]ScaleStatus // the scaler's last answer per queued job
	// observe holds timings noted inside a transaction, keyed by the job
	// event (job id, status) that publishes them once it committed; a
	// retried transaction overwrites its own note.
	observe map[observeKey]func()
	// started holds runs known to be running or ended (a committed job
	// running event said so; see publish), so that a job's running report
	// does not try to start its run again. Under mu; cleared when full.
	started map[string]struct{}
	// drains are the drained agents by id (see Drain).
	drains map[string]store.AgentDrain
	// runHeads caches the run rows dispatches are built from (see runHead).
	runHeads map[string]store.Run
	// unstored are the jobs whose output could not be stored for lack of
	// space, until they are settled (see storageFull).
	unstored map[string]*unstored
	// settling serialises retryUnstored between the loop and the agents'
	// connections.
	settling sync.Mutex
}

// maxRunHeads bounds the run-row cache (a row holds the run's event,
// changed files included); past it the cache starts over.
const maxRunHeads = 256

// runHead returns the row of run id, from a cache: a dispatch needs the
// run's event, source, ref and commit, which never change once the run is
// created, and the jobs of a wide matrix would otherwise read the same row
// once each. (Status and times, which do change, are not for dispatches.)
func (d *Dispatcher) runHead(ctx context.Context, tx *store.Tx, id string) (store.Run, error) {
	d.mu.Lock()
	run, ok := d.runHeads[id]
	d.mu.Unlock()
	if ok {
		return run, nil
	}
	run, err := tx.GetRunHead(ctx, id)
	if err != nil {
		return store.Run{}, err
	}
	d.mu.Lock()
	if len(d.runHeads) >= maxRunHeads {
		d.runHeads = make(map[string]store.Run, maxRunHeads)
	}
	d.runHeads[id] = run
	d.mu.Unlock()
	return run, nil
}

type observeKey struct{ jobID, status string }

// noteOnPublish records obs when the job event (jobID, status) is
// published, that is after the transaction noting it committed.
func (d *Dispatcher) noteOnPublish(jobID, status string, obs func()) {
	d.mu.Lock()
	d.observe[observeKey{jobID, status}] = obs
	d.mu.Unlock()
}

// maxStartedRuns bounds Dispatcher.started; forgetting a run only costs one
// statement per job start of it.
const maxStartedRuns = 4096

// runStarted reports whether the run is known to be running or ended.
func (d *Dispatcher) runStarted(runID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.started[runID]
	return ok
}

// publish records the timings noted for events, then publishes them.
func (d *Dispatcher) publish(events []apiv1.Event) {
	var run []func()
	d.mu.Lock()
	for _, e := range events {
		if e.Kind != "job" {
			continue
		}
		if e.Status == string(store.JobRunning) {
			// Committed with the job's start: its run is running (a run
			// never goes back to pending).
			if len(d.started) >= maxStartedRuns {
				clear(d.started)
			}
			d.started[e.RunID] = struct{}{}
		}
		k := observeKey{e.JobID, e.Status}
		if obs, ok := d.observe[k]; ok {
			run = append(run, obs)
			delete(d.observe, k)
		}
	}
	d.mu.Unlock()
	for _, obs := range run {
		obs()
	}
	d.sched.Publish(events)
}

// New returns a dispatcher; call Run to start its loop.
func New(logger *slog.Logger, db *store.DB, sched *scheduler.Scheduler, build DispatchBuilder, logs LogSink, cfg Config) *Dispatcher {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Instance == "" {
		cfg.Instance = "dispatcher-" + uuid.NewString()
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	return &Dispatcher{observe: map[observeKey]func(){}, started: map[string]struct{}{}, drains: map[string]store.AgentDrain{}, runHeads: map[string]store.Run{}, unstored: map[string]*unstored{},
		log: logger, db: db, sched: sched, build: build, logs: logs, cfg: cfg,
		reg: registry{agents: map[string]*Agent{}}, kick: make(chan struct{}, 1), attempt: map[string]int{}, scaled: map[string]ScaleStatus{},
	}
}

// JobsQueued wakes the dispatch loop: new jobs may fit free agents.
func (d *Dispatcher) JobsQueued() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Agents returns the connected agents, sorted by id.
func (d *Dispatcher) Agents() []*Agent { return d.reg.list() }

// HeartbeatInterval is the interval agents are told to use.
func (d *Dispatcher) HeartbeatInterval() time.Duration { return d.cfg.HeartbeatInterval }

// Run matches jobs to agents whenever woken and runs the sweeps, until ctx
// ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	defer d.bg.Wait() // nothing is sent, no log directory made, after Run returned
	ticker := time.NewTicker(d.sweepTick())
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.kick:
		case <-ticker.C:
			d.sweepExpiredTokens()
			d.reassertConnected(ctx)
			d.sendCancelRequests(ctx)
			d.sweepAcks(ctx)
			d.sweepRecoveries(ctx)
			d.retryUnstored(ctx)
		}
		d.dispatchAll(ctx)
	}
}

// sweepTick is how often the dispatcher's sweeps run: often enough for
// the shortest deadline it promises.
func (d *Dispatcher) sweepTick() time.Duration {
	tick := min(d.cfg.AckTimeout, d.cfg.RecoveryWindow, d.cfg.QueueSweepInterval, time.Second) / 2
	return max(tick, 10*time.Millisecond)
}

// dispatchAll gives queued jobs to free agents until no agent can take one.
func (d *Dispatcher) dispatchAll(ctx context.Context) {
	for {
		progressed := false
		// Label sets that found no job in this pass: another free agent
		// with the same labels would find none either, and a fleet of
		// identical agents would otherwise cost a claim transaction each
		// per wake. (Jobs queued meanwhile wake another pass.)
		exhausted := map[string]bool{}
		for _, a := range d.reg.list() {
			if a.free() <= 0 {
				continue
			}
			key := strings.Join(a.Labels, "\x00")
			bound := a.hasBound()
			if !bound && exhausted[key] {
				continue
			}
			ok, err := d.dispatchOne(ctx, a)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Error("dispatch failed", "agent_id", a.ID, "error", err)
				}
				continue
			}
			if !ok && !bound {
				exhausted[key] = true
			}
			progressed = progressed || ok
		}
		if !progressed {
			d.scaleQueued(ctx)
			return
		}
	}
}

// dispatchOne claims the oldest queued job that fits a and sends it. It
// reports whether anything changed (a job sent, or a dead row dropped),
// so that the caller tries again.
func (d *Dispatcher) dispatchOne(ctx context.Context, a *Agent) (bool, error) {
	if !a.reserve() {
		return false, nil
	}
	var c claimed
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		c, err = d.claimTx(ctx, tx, a)
		return err
	})
	if err != nil || !c.ok {
		a.unreserve()
		// A dropped row is progress: the agent may take the next job.
		return c.dropped && err == nil, err
	}
	return d.sendClaimed(ctx, c)
}

// claimed is a job claimed for an agent in a transaction, to be sent once
// the transaction commits (sendClaimed).
type claimed struct {
	ok      bool // a job was claimed
	dropped bool // a dead row was dropped instead (the job had ended)
	agent   *Agent
	run     store.Run
	job     store.Job
	attempt int
	waited  time.Duration
	events  []apiv1.Event
}

// claimTx claims, in tx, the job a should run next (see claim) and marks
// it dispatched to a. The caller holds a reservation of one of a's slots.
func (d *Dispatcher) claimTx(ctx context.Context, tx *store.Tx, a *Agent) (claimed, error) {
	now := d.cfg.Now()
	c := claimed{agent: a}
	entry, ok, err := d.claim(ctx, tx, a, now.Add(d.cfg.AckTimeout))
	if err != nil || !ok {
		return c, err
	}
	c.waited = now.Sub(entry.EnqueuedAt)
	// The dispatch needs the job's spec, not its step rows.
	job, err := tx.GetJobHead(ctx, entry.JobID)
	if err != nil {
		return c, err
	}
	if err := job.DecodeSpec(); err != nil {
		return c, err
	}
	attempt := job.Attempt + 1
	agentID := a.ID
	changed, err := tx.UpdateJobStatus(ctx, store.JobTransition{
		ID: job.ID, From: runstate.JobFrom(store.JobDispatched), To: store.JobDispatched,
		AgentID: &agentID, Attempt: &attempt, ResetSeq: true, // seqs start again with each dispatch
	})
	if err != nil {
		return c, err
	}
	if !changed {
		// The job ended (cancelled) while its row waited: drop the row.
		c.dropped = true
		_, err := tx.Dequeue(ctx, job.ID)
		return c, err
	}
	if c.run, err = d.runHead(ctx, tx, job.RunID); err != nil {
		return c, err
	}
	c.ok, c.job, c.attempt = true, job, attempt
	c.events = []apiv1.Event{{Kind: "job", RunID: job.RunID, Job: job.Name, JobID: job.ID, Status: string(store.JobDispatched)}}
	return c, nil
}

// sendClaimed sends a committed claim's dispatch to its agent (the
// reservation becomes the job). A dispatch that cannot be built fails the
// job; one that cannot be sent goes back to the queue.
func (d *Dispatcher) sendClaimed(ctx context.Context, c claimed) (bool, error) {
	a, job, attempt := c.agent, c.job, c.attempt
	d.cfg.Observer.QueueWait(max(c.waited, 0))
	d.publish(c.events)
	a.takeReserved(job.ID)
	d.setAttempt(job.ID, attempt)
	if s := d.scalerOf(); s != nil && a.Backend != "static" {
		s.OnAgentBusy(a.ID)
	}
	msg, err := d.build.BuildDispatch(context.WithValue(ctx, agentKey{}, a), c.run, job, attempt)
	var unrunnable *UnrunnableError
	if errors.As(err, &unrunnable) {
		a.release(job.ID)
		d.endJobByID(ctx, job.ID, store.JobFailure, unrunnable.Reason)
		d.JobsQueued()
		return true, nil
	}
	if err == nil {
		if msg.TimeoutMS == 0 {
			msg.TimeoutMS = d.cfg.DefaultJobTimeout.Milliseconds()
		}
		err = a.conn.Send(ctx, msg)
	}
	if err != nil {
		a.release(job.ID)
		d.requeue(ctx, store.RequeueRequest{JobID: job.ID, AgentID: a.ID, OnlyUnacked: true,
			Reason: fmt.Sprintf("send to agent %s: %v", a.ID, err)}, attempt)
		return false, fmt.Errorf("send job %q to agent %q: %w", job.ID, a.ID, err)
	}
	d.log.Info("job dispatched", "run_id", job.RunID, "job_id", job.ID, "job", job.Name, "agent_id", a.ID, "attempt", attempt)
	if p, ok := d.logs.(logPreparer); ok {
		d.bg.Go(func() {
			// A failure is not the job's: the first chunk's append
			// creates and syncs what is missing, and reports its own
			// error.
			if err := p.PrepareLog(context.WithoutCancel(ctx), job.RunID, job.ID); err != nil {
				d.log.Debug("prepare job log failed", "run_id", job.RunID, "job_id", job.ID, "error", err)
			}
		})
	}
	return true, nil
}

func (d *Dispatcher) scalerOf() Scaler {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.scaler
}

// claim takes the job an agent was spawned for if it still waits, else
// the oldest queued job the agent's labels cover.
func (d *Dispatcher) claim(ctx context.Context, tx *store.Tx, a *Agent, ackDeadline time.Time) (store.QueueEntry, bool, error) {
	if bound := a.takeBound(); bound != "" {
		entry, ok, err := tx.ClaimJob(ctx, d.cfg.Instance, bound, a.ID, ackDeadline)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return entry, false, err
		}
		if ok {
			return entry, true, nil
		}
	}
	return tx.ClaimForAgent(ctx, d.cfg.Instance, a.ID, a.Labels, ackDeadline)
}

func (d *Dispatcher) setAttempt(jobID string, attempt int) {
	d.mu.Lock()
	d.attempt[jobID] = attempt
	d.mu.Unlock()
}

// requeue puts a job dispatched to r.AgentID back in the queue, or fails
// it after MaxAttempts dispatches. attempt, when not 0, is the dispatch the
// decision was about: a later dispatch of the job (to the same agent after
// a reconnect, say) is left alone. A requeue whose condition no longer
// holds does nothing.
func (d *Dispatcher) requeue(ctx context.Context, r store.RequeueRequest, attempt int) {
	var events []apiv1.Event
	var done bool
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		events, done = nil, false
		if attempt != 0 {
			job, err := tx.GetJobHead(ctx, r.JobID)
			if err != nil || job.Attempt != attempt {
				return err
			}
		}
		var err error
		events, done, err = d.requeueTx(ctx, tx, r)
		return err
	})
	if err != nil {
		d.log.Error("requeue failed", "job_id", r.JobID, "agent_id", r.AgentID, "error", err)
		return
	}
	if !done {
		d.log.Debug("requeue not needed: the dispatch was settled meanwhile", "job_id", r.JobID, "agent_id", r.AgentID, "reason", r.Reason)
		return
	}
	d.log.Warn("job requeued", "job_id", r.JobID, "agent_id", r.AgentID, "reason", r.Reason)
	d.publish(events)
	d.JobsQueued()
}

func (d *Dispatcher) requeueTx(ctx context.Context, tx *store.Tx, r store.RequeueRequest) ([]apiv1.Event, bool, error) {
	entry, ok, err := tx.Requeue(ctx, r)
	if err != nil || !ok {
		return nil, false, err
	}
	job, err := tx.GetJob(ctx, r.JobID)
	if err != nil {
		return nil, false, err
	}
	if entry.DispatchAttempts >= MaxAttempts {
		events, err := d.endJobCause(ctx, tx, job, store.JobFailure,
			fmt.Sprintf("dispatch attempts exhausted (%d): %s", entry.DispatchAttempts, r.Reason), workflow.RetryInfrastructure)
		return events, true, err
	}
	changed, err := tx.UpdateJobStatus(ctx, store.JobTransition{ID: r.JobID, From: runstate.JobFrom(store.JobQueued), To: store.JobQueued})
	if err != nil || !changed {
		return nil, true, err
	}
	return []apiv1.Event{{Kind: "job", RunID: job.RunID, Job: job.Name, JobID: job.ID, Status: string(store.JobQueued), Error: r.Reason}}, true, nil
}

// failJob ends a job with failure (whatever non-terminal status it is in),
// marks its unfinished steps, removes its queue row and advances its run.
func (d *Dispatcher) failJob(ctx context.Context, tx *store.Tx, job store.Job, msg string) ([]apiv1.Event, error) {
	return d.endJob(ctx, tx, job, store.JobFailure, msg)
}

func (d *Dispatcher) endJob(ctx context.Context, tx *store.Tx, job store.Job, to store.JobStatus, msg string) ([]apiv1.Event, error) {
	events, err := d.endJobOnly(ctx, tx, job, to, msg)
	if err != nil || events == nil {
		return nil, err
	}
	more, err := d.sched.AdvanceTx(ctx, tx, job.RunID)
	return append(events, more...), err
}

// endJobOnly is endJob without advancing the run, for callers that end
// several jobs of a run at once and advance it after the last.
func (d *Dispatcher) endJobOnly(ctx context.Context, tx *store.Tx, job store.Job, to store.JobStatus, msg string) ([]apiv1.Event, error) {
	now := d.cfg.Now()
	changed, err := tx.UpdateJobStatus(ctx, store.JobTransition{ID: job.ID, From: runstate.JobFrom(to), To: to, Error: &msg, FinishedAt: &now})
	if err != nil || !changed {
		return nil, err
	}
	if job.StartedAt != nil {
		took := max(now.Sub(*job.StartedAt), 0)
		d.noteOnPublish(job.ID, string(to), func() { d.cfg.Observer.JobDuration(string(to), took) })
	}
	stepTo := store.StepCancelled
	if to == store.JobFailure {
		stepTo = store.StepSkipped
	}
	steps := job.Steps
	if steps == nil { // read without its steps (GetJobHead)
		if steps, err = tx.ListJobSteps(ctx, job.ID); err != nil {
			return nil, err
		}
	}
	for _, st := range steps {
		if runstate.StepTerminal(st.Status) {
			continue // ended already; the guarded update would change nothing
		}
		target := stepTo
		if st.Status == store.StepRunning {
			target = store.StepCancelled
			if to == store.JobFailure {
				target = store.StepFailure
			}
		}
		if _, err := tx.UpdateStepStatus(ctx, store.StepTransition{JobID: job.ID, Index: st.Index, From: runstate.StepFrom(target), To: target, FinishedAt: &now}); err != nil {
			return nil, err
		}
	}
	if _, err := tx.Dequeue(ctx, job.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return []apiv1.Event{{Kind: "job", RunID: job.RunID, Job: job.Name, JobID: job.ID, Status: string(to), Error: msg}}, nil
}

// sweepAcks handles dispatches whose ack deadline passed. A late ack is no
// proof that the agent lacks the job: under load, or behind a slow link,
// the agent may be running it already. So the job is never handed to
// another agent from here. The silent agent's connection is closed
// (4031); its jobs then wait for it like those of any disconnected agent,
// and its reconnect settles them: a job it reports in flight is resumed,
// one it does not report goes back to the queue (see reconcileMissing).
// If the agent is already gone, the row gets the recovery window here.
func (d *Dispatcher) sweepAcks(ctx context.Context) {
	rows, err := d.db.ExpiredAckDeadlines(ctx, d.cfg.Instance, d.cfg.Now())
	if err != nil {
		d.log.Error("ack sweep failed", "error", err)
		return
	}
	for _, r := range rows {
		if a := d.reg.get(r.AgentID); a != nil {
			if a.kick(protocol.CloseAckTimeout, "dispatch not acknowledged in time") {
				d.log.Warn("agent closed: dispatch not acknowledged in time", "agent_id", r.AgentID, "job_id", r.JobID,
					"ack_timeout", d.cfg.AckTimeout)
			}
			continue // Unregister gives its jobs the recovery window
		}
		if _, err := d.db.SetRecovery(ctx, d.cfg.Instance, r.JobID, r.AgentID, d.cfg.Now().Add(d.cfg.RecoveryWindow)); err != nil && !errors.Is(err, store.ErrNotFound) {
			d.log.Error("set recovery window failed", "job_id", r.JobID, "agent_id", r.AgentID, "error", err)
		}
	}
}

// sweepRecoveries fails the jobs whose agent did not come back in time.
func (d *Dispatcher) sweepRecoveries(ctx context.Context) {
	rows, err := d.db.ExpiredRecoveries(ctx, d.cfg.Instance, d.cfg.Now())
	if err != nil {
		d.log.Error("recovery sweep failed", "error", err)
		return
	}
	for _, r := range rows {
		if r.CancelReason != "" {
			// Cancelled while its agent was away: it ends cancelled, not
			// lost, and is not dispatched again.
			d.endLostJob(ctx, r, store.JobCancelled, r.CancelReason)
			continue
		}
		if r.AckDeadline != nil {
			// Never acknowledged: the agent most likely never received it.
			d.requeue(ctx, store.RequeueRequest{JobID: r.JobID, AgentID: r.AgentID, OnlyUnacked: true, OnlyRecovering: true,
				Reason: fmt.Sprintf("agent %s disconnected before acknowledging the dispatch and did not come back within %s", r.RecoveryAgentID, d.cfg.RecoveryWindow)}, 0)
			continue
		}
		msg := fmt.Sprintf("agent lost: agent %s disconnected and did not come back within %s", r.RecoveryAgentID, d.cfg.RecoveryWindow)
		d.endLostJob(ctx, r, store.JobFailure, msg)
	}
}

// endLostJob fails a job whose recovery window r expired (or retries it:
// its agent is lost), unless its agent reclaimed it after the sweep listed
// it.
func (d *Dispatcher) endLostJob(ctx context.Context, r store.QueueEntry, to store.JobStatus, msg string) {
	d.endJobIf(ctx, r.JobID, to, msg, workflow.RetryAgentLost, func(tx *store.Tx) (bool, error) {
		e, err := tx.GetQueueEntry(ctx, r.JobID)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil // the job ended meanwhile
		}
		// Not reclaimed meanwhile, here or on another instance.
		return err == nil && e.RecoveryDeadline != nil && e.RecoveryAgentID == r.RecoveryAgentID && e.Owner == d.cfg.Instance, err
	})
}

// sweepQueue fails the jobs that waited in the queue too long, with the
// last provisioning error as their error when there is one.
func (d *Dispatcher) sweepQueue(ctx context.Context) {
	rows, err := d.db.ExpiredQueueRows(ctx, d.cfg.Now())
	if err != nil {
		d.log.Error("queue sweep failed", "error", err)
		return
	}
	for _, r := range rows {
		msg := fmt.Sprintf("queue timeout: no agent with labels %v took the job within the queue timeout", r.Labels)
		cause := "" // waiting longer would not help
		if r.LastProvisioningError != "" {
			msg = "queue timeout: " + r.LastProvisioningError
			cause = workflow.RetryInfrastructure // no agent could be provisioned for it
		}
		if why := d.heldWhy(ctx, r.JobID); why != "" {
			msg, cause = "queue timeout: "+why, ""
		}
		d.endJobIf(ctx, r.JobID, store.JobFailure, msg, cause, nil)
	}
}

func (d *Dispatcher) endJobByID(ctx context.Context, jobID string, to store.JobStatus, msg string) {
	d.endJobIf(ctx, jobID, to, msg, "", nil)
}

// endJobIf ends a job, in one transaction with cond (when not nil), which
// says whether the job should still end. A failure for cause may retry
// the job instead (see endJobCause).
func (d *Dispatcher) endJobIf(ctx context.Context, jobID string, to store.JobStatus, msg, cause string, cond func(tx *store.Tx) (bool, error)) {
	var events []apiv1.Event
	err := d.db.Tx(ctx, func(tx *store.Tx) error {
		events = nil
		if cond != nil {
			if ok, err := cond(tx); err != nil || !ok {
				return err
			}
		}
		job, err := tx.GetJob(ctx, jobID)
		if err != nil {
			return err
		}
		events, err = d.endJobCause(ctx, tx, job, to, msg, cause)
		return err
	})
	if err != nil {
		d.log.Error("end job failed", "job_id", jobID, "error", err)
		return
	}
	if len(events) > 0 && events[0].Status == string(to) { // not retried (markRetry logs that)
		d.log.Warn("job ended by the orchestrator", "job_id", jobID, "status", to, "reason", msg)
	}
	d.publish(events)
}
