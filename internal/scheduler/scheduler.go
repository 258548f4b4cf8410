// Package scheduler turns a matched workflow into a run (jobs, steps and
// needs edges written in one transaction) and advances a run's needs graph
// whenever one of its jobs ends: it queues the jobs whose needs are met,
// skips the ones whose needs can no longer be met (transitively), and sets
// the run's final status once every job has ended. It also keeps runs and
// jobs to their concurrency groups and matrix limits (concurrency.go),
// sends a job whose attempt failed back to the queue when its retry:
// says so (retry.go), and reuses the jobs that succeeded in a rerun of a
// run's failed jobs (rerun.go).
//
// The graph lives in the database, not in memory, so an orchestrator that
// restarts simply calls Advance for every unfinished run and carries on.
// A *Scheduler is safe for concurrent use.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

// Config tunes the scheduler.
type Config struct {
	// QueueTimeout is how long a queued job may wait for an agent; 0 means
	// forever.
	QueueTimeout time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Secrets, when set, is asked at a run's creation which of the
	// secrets its jobs declare are not set: such a run fails at once,
	// before any job runs. Nil skips the check.
	Secrets SecretChecker
	// ConcurrencySweep is how often RunConcurrency sweeps every
	// concurrency group; 0 means 5s.
	ConcurrencySweep time.Duration
}

// SecretChecker says which of the named secrets a job of source in
// environment ("" for none) could not receive because they are not set.
type SecretChecker interface {
	Missing(ctx context.Context, source, environment string, names []string) ([]string, error)
}

// Publisher receives the status changes of runs, after they are committed.
type Publisher interface {
	Publish(ev apiv1.Event)
}

// Queuer is told when jobs were queued, so agents can be matched at once.
type Queuer interface {
	JobsQueued()
	// ClaimTx claims, in tx, up to max queued jobs for free agents, in
	// the transaction that queued them (a run's creation); the claims are
	// sent after the commit (Claims.Send) or released if it fails
	// (Claims.Abort).
	ClaimTx(ctx context.Context, tx *store.Tx, max int) (Claims, error)
}

// Claims are jobs claimed in a transaction, to be sent to their agents
// once it committed.
type Claims interface {
	Send(ctx context.Context)
	Abort()
}

// Scheduler creates and advances runs.
type Scheduler struct {
	db    *store.DB
	log   *slog.Logger
	cfg   Config
	pub   Publisher
	queue Queuer
	conc  *concurrencyNotes // what RunConcurrency is to settle (concurrency.go)
}

// New returns a scheduler over db. pub and queue may be nil.
func New(logger *slog.Logger, db *store.DB, cfg Config, pub Publisher, queue Queuer) *Scheduler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{db: db, log: logger, cfg: cfg, pub: pub, queue: queue, conc: newConcurrencyNotes()}
}

// RunInput is one matched workflow to run.
type RunInput struct {
	Source   string
	Workflow workflow.Workflow
	Event    trigger.Event
	// Inputs are the resolved manual inputs (defaults applied); nil means
	// the workflow's defaults.
	Inputs      map[string]string
	ParentRunID string
	// Reuse, for a rerun of ParentRunID's failed jobs, are the jobs of
	// that run (by name) whose outcome the new run copies instead of
	// running them (see ReusableJobs).
	Reuse map[string]store.Job
	// ForkPolicy is the source's policy for a pull request from a fork,
	// for such an event only ("" otherwise). store.ForkApprove creates the
	// run awaiting approval (see Approve); store.ForkRun starts it with
	// its secrets withheld (each declared secret reads empty). The run's
	// event records both, so a rerun keeps them.
	ForkPolicy store.ForkPolicy
	// ScheduleTick, for a run a schedule starts (Event.Kind schedule), is
	// the tick that starts it: the run is created only if no run of the
	// same source and workflow claimed that tick before, in the same
	// transaction; otherwise CreateRun returns ErrTickTaken.
	ScheduleTick time.Time
}

// ErrTickTaken is returned by CreateRun when the schedule tick was
// already claimed by a run of the same source and workflow (on this or
// another orchestrator): nothing was created.
var ErrTickTaken = errors.New("schedule tick already started a run")

// Record is what a run stores as its event: the normalised event, the
// inputs its jobs were bound with, and how the fork policy applied.
type Record struct {
	trigger.Event
	ResolvedInputs map[string]string `json:"resolved_inputs,omitempty"`
	// ForkPolicy is the fork policy the run was created under, for a pull
	// request from a fork ("approve" or "run"); empty otherwise.
	ForkPolicy store.ForkPolicy `json:"fork_policy,omitempty"`
	// SecretsWithheld is true when the run's jobs get no secrets: each
	// secret a job declares reads as the empty string.
	SecretsWithheld bool `json:"secrets_withheld,omitempty"`
}

// DecodeRecord reads back a run's stored event record.
func DecodeRecord(raw json.RawMessage) (Record, error) {
	var rec Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return Record{}, fmt.Errorf("decode run event: %w", err)
	}
	return rec, nil
}

// DecodeEvent reads back a run's stored event and inputs.
func DecodeEvent(raw json.RawMessage) (trigger.Event, map[string]string, error) {
	rec, err := DecodeRecord(raw)
	if err != nil {
		return trigger.Event{}, nil, err
	}
	return rec.Event, rec.ResolvedInputs, nil
}

// Timeline entries (job events) that say why a run of a fork's pull
// request waits or runs without secrets, and who approved it.
const (
	EventAwaitingApproval = "awaiting_approval"
	EventApproved         = "approved"
	EventSecretsWithheld  = "secrets_withheld"
)

// ErrNotAwaitingApproval is returned by Approve for a run that is not
// awaiting approval.
var ErrNotAwaitingApproval = errors.New("run is not awaiting approval")

// forkOrigin names where a fork's pull request comes from, for messages.
func forkOrigin(ev trigger.Event) string {
	from := "a fork"
	if ev.HeadRepo != "" {
		from = "fork " + ev.HeadRepo
	}
	if ev.Number > 0 {
		return fmt.Sprintf("pull request #%d from %s", ev.Number, from)
	}
	return "pull request from " + from
}

// CreateRun writes a run for one matched workflow: its jobs bound to the
// event, root jobs queued (or skipped when their `if` is false), the rest
// waiting. All in one transaction.
func (s *Scheduler) CreateRun(ctx context.Context, in RunInput) (store.Run, error) {
	inputs := in.Inputs
	if inputs == nil {
		inputs = in.Workflow.DefaultInputs()
	}
	rec := Record{Event: in.Event, ResolvedInputs: inputs}
	var note store.JobEvent // written to every job's timeline when set
	await := false
	runID := store.NewID()
	switch in.ForkPolicy {
	case "":
	case store.ForkApprove:
		rec.ForkPolicy, await = in.ForkPolicy, true
		note = store.JobEvent{Type: EventAwaitingApproval, Detail: fmt.Sprintf(
			"awaiting approval: %s; nothing runs until an owner or admin approves it (kici-admin runs approve %s), which starts it with the source's secrets",
			forkOrigin(in.Event), runID)}
	case store.ForkRun:
		rec.ForkPolicy, rec.SecretsWithheld = in.ForkPolicy, true
		note = store.JobEvent{Type: EventSecretsWithheld, Detail: fmt.Sprintf(
			"secrets withheld: %s runs under the source's fork policy \"run\"; every secret the job declares reads empty",
			forkOrigin(in.Event))}
	default:
		return store.Run{}, fmt.Errorf("create run of workflow %q: unknown fork policy %q", in.Workflow.Name, in.ForkPolicy)
	}
	evRaw, err := json.Marshal(rec)
	if err != nil {
		return store.Run{}, fmt.Errorf("encode event: %w", err)
	}
	now := s.cfg.Now()
	nr := store.NewRun{
		ID:     runID,
		Source: in.Source, Workflow: in.Workflow.Name, WorkflowFile: in.Workflow.File,
		Event: evRaw, EventKind: in.Event.Kind, Ref: in.Event.Ref, SHA: in.Event.SHA,
		Plan: in.Workflow, ParentRunID: in.ParentRunID,
	}
	if await {
		// Nothing is decided or queued before the approval: Approve moves
		// the run to pending and advance then takes the root jobs.
		nr.Status, nr.Error = store.RunAwaitingApproval, note.Detail
	}
	if s.cfg.QueueTimeout > 0 {
		exp := now.Add(s.cfg.QueueTimeout)
		nr.QueueExpiresAt = &exp
	}
	vars := in.Event.Vars()
	// A run of a workflow-level concurrency group decides its root jobs
	// once it is let into the group (advance, below).
	group := in.Workflow.Concurrency.BindGroup(vars, inputs)
	type rootVerdict struct {
		status store.JobStatus
		err    string
	}
	verdicts := map[string]rootVerdict{}
	var unset unsetSecrets
	if !await { // an approval grants the secrets; they are checked at dispatch
		unset, err = s.unsetSecrets(ctx, in, rec)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("create run of workflow %q: check secrets: %w", in.Workflow.Name, err)
	}
	creationError := ""
	if len(unset) > 0 {
		// Nothing runs: the jobs that declare an unset secret fail, the
		// others are skipped, and the run fails naming the secrets.
		creationError = unsetMessage(unset, in.Source)
		for _, j := range in.Workflow.Jobs {
			if msg, ok := unset.jobError(j); ok {
				verdicts[j.Name] = rootVerdict{status: store.JobFailure, err: msg}
			} else {
				verdicts[j.Name] = rootVerdict{status: store.JobSkipped, err: "not run: " + creationError}
			}
		}
	}
	for _, j := range in.Workflow.Jobs {
		bound := j.Bind(vars, inputs)
		nj := store.NewJob{Spec: bound, Status: store.JobWaiting}
		// A root job of an environment is left to advance, below, which
		// asks the environment whether it may queue.
		if _, reused := in.Reuse[j.Name]; len(j.Needs) == 0 && !await && creationError == "" && j.Environment == "" && !reused && group == "" {
			run, err := workflow.EvalIf(j.If, workflow.IfContext{
				Event: vars, Env: bound.Env, Matrix: j.Matrix, Inputs: inputs,
				Job: workflow.StatusVars{Status: workflow.NeedSuccess},
			})
			switch {
			case err != nil:
				verdicts[j.Name] = rootVerdict{status: store.JobFailure, err: err.Error()}
			case !run:
				verdicts[j.Name] = rootVerdict{status: store.JobSkipped, err: fmt.Sprintf("if: %s is false", j.If)}
			default:
				nj.Status, nj.Enqueue = store.JobQueued, true
			}
		}
		nr.Jobs = append(nr.Jobs, nj)
	}
	queued := 0
	for _, nj := range nr.Jobs {
		if nj.Enqueue {
			queued++
		}
	}
	var run store.Run
	var events []apiv1.Event
	var claims Claims
	var cancels []groupCancel // the group's decisions, made after the commit
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		events = events[:0]
		if claims != nil { // an earlier attempt of this transaction
			claims.Abort()
			claims = nil
		}
		var err error
		if !in.ScheduleTick.IsZero() {
			ok, err := tx.ClaimScheduleTick(ctx, store.ScheduleFire{Source: in.Source, Workflow: in.Workflow.Name,
				Tick: in.ScheduleTick, Cron: in.Event.Cron, RunID: runID, FiredAt: now})
			if err != nil {
				return err
			}
			if !ok {
				return ErrTickTaken
			}
		}
		run, err = tx.CreateRun(ctx, nr)
		if err != nil {
			return err
		}
		if note.Type != "" {
			for _, j := range run.Jobs {
				ev := note
				ev.JobID, ev.RunID, ev.CreatedAt = j.ID, run.ID, now
				if _, err := tx.AddJobEvent(ctx, ev); err != nil {
					return err
				}
			}
		}
		for _, j := range run.Jobs {
			v, ok := verdicts[j.Name]
			if !ok {
				continue
			}
			if err := s.endJobUnrun(ctx, tx, j, v.status, v.err, now); err != nil {
				return err
			}
		}
		if err := s.reuseJobs(ctx, tx, run, in, now); err != nil {
			return err
		}
		if creationError != "" {
			ok, err := tx.UpdateRunStatus(ctx, store.RunTransition{ID: run.ID, From: runstate.RunFrom(store.RunFailure),
				To: store.RunFailure, Error: &creationError, FinishedAt: &now})
			if err != nil {
				return err
			}
			if ok {
				run.Status, run.Error = store.RunFailure, creationError
			}
			return nil
		}
		if cancels, err = s.joinConcurrency(ctx, tx, &run, group, in.Workflow.Concurrency, await); err != nil {
			return err
		}
		if events, err = s.advance(ctx, tx, run.ID); err != nil {
			return err
		}
		if group != "" {
			queued = countQueued(events)
		}
		// The root jobs leave with this transaction when agents are free.
		if s.queue != nil && queued > 0 {
			claims, err = s.queue.ClaimTx(ctx, tx, queued)
		}
		return err
	})
	if err != nil {
		if claims != nil {
			claims.Abort()
		}
		return store.Run{}, fmt.Errorf("create run of workflow %q: %w", in.Workflow.Name, err)
	}
	s.log.Info("run created", "run_id", run.ID, "workflow", run.Workflow, "source", run.Source, "jobs", len(run.Jobs), "status", run.Status)
	s.publish(append([]apiv1.Event{{Kind: "run", RunID: run.ID, Status: string(run.Status), Error: run.Error}}, events...))
	if claims != nil {
		claims.Send(ctx)
	}
	s.afterJoin(ctx, run, cancels)
	if s.queue != nil {
		s.queue.JobsQueued()
	}
	return run, nil
}

// Approve starts a run that awaits approval: the run becomes pending (its
// error cleared), every job's timeline records who approved it, and its
// root jobs are queued (or skipped by their if:) as at the creation of any
// other run. A run in any other status gives ErrNotAwaitingApproval; a
// missing one store.ErrNotFound.
func (s *Scheduler) Approve(ctx context.Context, runID, approver string) (store.Run, error) {
	var events []apiv1.Event
	var cancels []groupCancel
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		events, cancels = nil, nil
		if err := tx.LockRun(ctx, runID); err != nil {
			return err
		}
		changed, err := tx.UpdateRunStatus(ctx, store.RunTransition{
			ID: runID, From: runstate.RunFrom(store.RunPending), To: store.RunPending, Error: new(""),
		})
		if err != nil {
			return err
		}
		if !changed {
			// Not a fork's run awaiting approval: its jobs held for their
			// environment, if any, are what is approved.
			n, err := s.approveJobs(ctx, tx, runID, approver, &events)
			if err == nil && n == 0 {
				err = ErrNotAwaitingApproval
			}
			return err
		}
		run, err := tx.GetRunOutline(ctx, runID)
		if err != nil {
			return err
		}
		now := s.cfg.Now()
		for _, j := range run.Jobs {
			if _, err := tx.AddJobEvent(ctx, store.JobEvent{JobID: j.ID, RunID: runID, Type: EventApproved,
				Detail: "approved by " + approver + "; runs with the source's secrets", CreatedAt: now}); err != nil {
				return err
			}
		}
		if cancels, err = s.enterApprovedRun(ctx, tx, runID); err != nil {
			return err
		}
		events = append(events, apiv1.Event{Kind: "run", RunID: runID, Status: string(store.RunPending)})
		more, err := s.advance(ctx, tx, runID)
		events = append(events, more...)
		return err
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("approve run %q: %w", runID, err)
	}
	s.log.Info("run approved", "run_id", runID, "by", approver)
	s.Publish(events)
	s.cancelForGroup(ctx, cancels)
	return s.db.GetRun(ctx, runID)
}

// endJobUnrun ends a job that never reached an agent (skipped, failed
// before dispatch, cancelled while waiting): its steps become skipped or
// cancelled too, and its queue row goes.
func (s *Scheduler) endJobUnrun(ctx context.Context, tx *store.Tx, j store.Job, to store.JobStatus, msg string, now time.Time) error {
	changed, err := tx.UpdateJobStatus(ctx, store.JobTransition{ID: j.ID, From: runstate.JobFrom(to), To: to, Error: &msg, FinishedAt: &now})
	if err != nil || !changed {
		return err
	}
	stepTo := store.StepSkipped
	if to == store.JobCancelled {
		stepTo = store.StepCancelled
	}
	for _, st := range j.Steps {
		if _, err := tx.UpdateStepStatus(ctx, store.StepTransition{JobID: j.ID, Index: st.Index, From: runstate.StepFrom(stepTo), To: stepTo}); err != nil {
			return err
		}
	}
	if _, err := tx.Dequeue(ctx, j.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// Advance re-evaluates a run after one of its jobs changed: it queues
// every waiting job whose needs are all met, skips every one whose needs
// can no longer be met, and ends the run when all jobs have ended. It is
// idempotent, so it may run after any change and after a restart.
func (s *Scheduler) Advance(ctx context.Context, runID string) error {
	var events []apiv1.Event
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		events, err = s.advance(ctx, tx, runID)
		return err
	})
	if err != nil {
		return fmt.Errorf("advance run %q: %w", runID, err)
	}
	s.publish(events)
	if s.queue != nil && hasQueued(events) {
		s.queue.JobsQueued()
	}
	return nil
}

// AdvanceTx is Advance inside the caller's transaction; the returned
// events are to be published (Publish) after the commit.
func (s *Scheduler) AdvanceTx(ctx context.Context, tx *store.Tx, runID string) ([]apiv1.Event, error) {
	return s.advance(ctx, tx, runID)
}

// Publish hands events to the publisher and, when a job was queued, tells
// the queuer. Call it after the transaction that produced them committed.
func (s *Scheduler) Publish(events []apiv1.Event) {
	s.publish(events)
	if s.queue != nil && hasQueued(events) {
		s.queue.JobsQueued()
	}
}

func hasQueued(events []apiv1.Event) bool {
	for _, e := range events {
		if e.Kind == "job" && e.Status == string(store.JobQueued) {
			return true
		}
	}
	return false
}

func (s *Scheduler) publish(events []apiv1.Event) {
	s.conc.note(events)
	if s.pub == nil {
		return
	}
	for _, e := range events {
		s.pub.Publish(e)
	}
}

func (s *Scheduler) advance(ctx context.Context, tx *store.Tx, runID string) ([]apiv1.Event, error) {
	// Serialise the advances of one run: each must see the jobs the
	// others ended, or the run's last two jobs, ending together, could
	// each leave the run to the other.
	if err := tx.LockRun(ctx, runID); err != nil {
		return nil, err
	}
	// Nothing can change while no job waits and some job has not ended:
	// no job can be queued or skipped, and the run cannot end. That is
	// every job end of a wide matrix but the last, so it is checked with
	// a count before any job row is read.
	counts, err := tx.CountRunJobs(ctx, runID)
	if err != nil {
		return nil, err
	}
	unfinished := 0
	for st, n := range counts {
		if !runstate.JobTerminal(st) {
			unfinished += n
		}
	}
	if counts[store.JobWaiting] == 0 && unfinished > 0 {
		return nil, nil
	}
	// The outline leaves specs encoded and steps out: only the jobs that
	// become ready are decoded below, so a wide run is not decoded whole
	// after every job that ends.
	run, err := tx.GetRunOutline(ctx, runID)
	if err != nil {
		return nil, err
	}
	if runstate.RunTerminal(run.Status) {
		return nil, nil
	}
	edges, err := tx.ListJobNeeds(ctx, runID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*store.Job, len(run.Jobs))
	for i := range run.Jobs {
		byID[run.Jobs[i].ID] = &run.Jobs[i]
	}
	upstreams := map[string][]store.JobNeed{}
	for _, e := range edges {
		upstreams[e.JobID] = append(upstreams[e.JobID], e)
	}
	ev, inputs, err := DecodeEvent(run.Event)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	var events []apiv1.Event
	// A run awaiting approval queues nothing; it can only end, when its
	// jobs are cancelled.
	// Nor does a run waiting for its concurrency group.
	group, held, err := s.runHeld(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	for changed := run.Status != store.RunAwaitingApproval && !held; changed; {
		changed = false
		for i := range run.Jobs {
			j := &run.Jobs[i]
			if j.Status != store.JobWaiting {
				continue
			}
			to, reason, ready, err := s.decide(j, upstreams[j.ID], byID, ev, inputs)
			if err != nil {
				return nil, err
			}
			if !ready {
				continue
			}
			if to == store.JobQueued {
				verdict, msg, err := s.environmentGate(ctx, tx, runID, ev, j, &events)
				if err != nil {
					return nil, err
				}
				switch verdict {
				case gateHold:
					continue // until someone approves it
				case gateFail:
					to, reason = store.JobFailure, msg
				}
			}
			switch to {
			case store.JobQueued:
				ok, err := tx.UpdateJobStatus(ctx, store.JobTransition{ID: j.ID, From: runstate.JobFrom(to), To: to})
				if err != nil {
					return nil, err
				}
				if ok {
					entry := store.NewQueueEntry{JobID: j.ID, RunID: runID, Labels: j.RunsOn}
					if s.cfg.QueueTimeout > 0 {
						exp := now.Add(s.cfg.QueueTimeout)
						entry.ExpiresAt = &exp
					}
					if _, err := tx.Enqueue(ctx, entry); err != nil {
						return nil, err
					}
				}
			default:
				full, err := tx.GetJob(ctx, j.ID) // with its steps, to end them too
				if err != nil {
					return nil, err
				}
				if err := s.endJobUnrun(ctx, tx, full, to, reason, now); err != nil {
					return nil, err
				}
			}
			j.Status, j.Error = to, reason
			events = append(events, apiv1.Event{Kind: "job", RunID: runID, Job: j.Name, JobID: j.ID, Status: string(to), Error: reason})
			changed = true
		}
	}
	for i := range run.Jobs {
		// aggregate reads continue-on-error of the failed jobs.
		if run.Jobs[i].Status == store.JobFailure {
			if err := run.Jobs[i].DecodeSpec(); err != nil {
				return nil, err
			}
		}
	}
	if to, msg, done := aggregate(run.Jobs); done {
		msg = endNote(group, to, msg)
		ok, err := tx.UpdateRunStatus(ctx, store.RunTransition{ID: runID, From: runstate.RunFrom(to), To: to, Error: &msg, FinishedAt: &now})
		if err != nil {
			return nil, err
		}
		if ok {
			events = append(events, apiv1.Event{Kind: "run", RunID: runID, Status: string(to), Error: msg})
		}
	}
	return events, nil
}

// decide says what a waiting job becomes, if its upstreams have all ended.
// The specs of j and its upstreams are decoded once they are needed.
func (s *Scheduler) decide(j *store.Job, ups []store.JobNeed, byID map[string]*store.Job, ev trigger.Event, inputs map[string]string) (store.JobStatus, string, bool, error) {
	for _, e := range ups {
		up := byID[e.NeedsJobID]
		if up == nil || !runstate.JobTerminal(up.Status) {
			return "", "", false, nil
		}
		if err := up.DecodeSpec(); err != nil {
			return "", "", false, err
		}
	}
	if err := j.DecodeSpec(); err != nil {
		return "", "", false, err
	}
	needs := map[string]workflow.StatusVars{}
	var unmet []string
	for _, e := range ups {
		up := byID[e.NeedsJobID]
		status := effectiveStatus(up)
		if !slices.Contains(e.RunOn, status) {
			unmet = append(unmet, fmt.Sprintf("%s (%s)", up.Name, status))
		}
		base := up.Spec.Base
		if base == "" {
			base = up.Name
		}
		needs[base] = workflow.StatusVars{Status: worse(needs[base].Status, status)}
	}
	if len(unmet) > 0 {
		return store.JobSkipped, "upstream_unmet: " + strings.Join(unmet, ", "), true, nil
	}
	overall := workflow.NeedSuccess
	for _, n := range needs {
		overall = worse(overall, n.Status)
	}
	if overall == workflow.NeedSkipped {
		overall = workflow.NeedSuccess
	}
	run, err := workflow.EvalIf(j.Spec.If, workflow.IfContext{
		Event: ev.Vars(), Env: j.Spec.Env, Matrix: j.Spec.Matrix, Inputs: inputs,
		Needs: needs, Job: workflow.StatusVars{Status: overall},
	})
	if err != nil {
		return store.JobFailure, err.Error(), true, nil
	}
	if !run {
		return store.JobSkipped, fmt.Sprintf("if: %s is false", j.Spec.If), true, nil
	}
	return store.JobQueued, "", true, nil
}

// effectiveStatus is the status an upstream counts as for its dependants:
// a failure of a continue-on-error job counts as success.
func effectiveStatus(j *store.Job) string {
	if j.Status == store.JobFailure && j.Spec.ContinueOnError {
		return workflow.NeedSuccess
	}
	return string(j.Status)
}

// worse combines the statuses of a matrix job's combinations: failure
// beats cancelled beats success beats skipped.
func worse(a, b string) string {
	rank := map[string]int{"": 0, workflow.NeedSkipped: 1, workflow.NeedSuccess: 2, workflow.NeedCancelled: 3, workflow.NeedFailure: 4}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// aggregate computes a run's final status once every job has ended: a
// failed job (without continue-on-error) fails the run; otherwise a
// cancelled job cancels it; otherwise it succeeded (skipped jobs count as
// success).
func aggregate(jobs []store.Job) (store.RunStatus, string, bool) {
	var failed, cancelled []string
	for _, j := range jobs {
		if !runstate.JobTerminal(j.Status) {
			return "", "", false
		}
		switch {
		case j.Status == store.JobFailure && !j.Spec.ContinueOnError:
			failed = append(failed, j.Name)
		case j.Status == store.JobCancelled:
			cancelled = append(cancelled, j.Name)
		}
	}
	switch {
	case len(failed) > 0:
		return store.RunFailure, "failed jobs: " + strings.Join(failed, ", "), true
	case len(cancelled) > 0:
		return store.RunCancelled, "cancelled jobs: " + strings.Join(cancelled, ", "), true
	}
	return store.RunSuccess, "", true
}
