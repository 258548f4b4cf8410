package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// Concurrency groups and matrix limits (docs/workflows.md#concurrency).
//
// What must never happen twice is decided in a transaction that holds the
// group's lock in the database: a run joins its workflow-level group, and
// starts or waits, in the transaction that creates it (or approves it); a
// waiting run starts in one that finds the group free; a job of a
// job-level group, or of a matrix with max-parallel, is dispatched only by
// a claim that finds its slot free (store.ClaimForAgent). So two
// orchestrators on one database never start two runs, or dispatch two
// jobs, of one group.
//
// What follows from a change (cancelling the runs and jobs a newcomer
// displaces, cancelling a failed combination's siblings, starting the
// next waiting run when one ends) is done after the change committed: the
// scheduler notes the runs and jobs of the events it publishes and
// settles their groups in RunConcurrency's loop, which also sweeps every
// group now and then. Every such decision is made again from the database
// alone, so an orchestrator that stops between the commit and the cancel
// leaves nothing waiting forever: the next sweep, on any orchestrator,
// does what it did not.

// Canceller cancels runs and jobs the way an operator's cancel does:
// jobs not on an agent end at once, agents running one are told to stop
// it. The scheduler uses its Queuer's when the Queuer is one (the
// dispatcher), and otherwise ends the jobs itself.
type Canceller interface {
	CancelRun(ctx context.Context, runID, reason string) error
	CancelJobs(ctx context.Context, runID string, jobIDs []string, reason string) error
}

// defaultConcurrencySweep is how often RunConcurrency sweeps every group
// when Config.ConcurrencySweep is zero.
const defaultConcurrencySweep = 5 * time.Second

// maxNoted bounds the runs and jobs noted for the loop; past it the loop
// sweeps every group instead.
const maxNoted = 10000

// concurrencyNotes are the runs and jobs whose groups the loop is to
// settle, noted from published events.
type concurrencyNotes struct {
	mu     sync.Mutex
	ended  map[string]bool // runs that ended: their group may start the next
	queued map[string]bool // jobs that entered the queue: their group may cancel older ones
	failed map[string]bool // jobs that failed: their matrix may be fail-fast
	sweep  bool            // too much noted: sweep everything
	kick   chan struct{}
}

func newConcurrencyNotes() *concurrencyNotes {
	return &concurrencyNotes{ended: map[string]bool{}, queued: map[string]bool{}, failed: map[string]bool{},
		kick: make(chan struct{}, 1)}
}

// note records what of events the loop must look at, and wakes it.
func (n *concurrencyNotes) note(events []apiv1.Event) {
	woke := false
	n.mu.Lock()
	for _, e := range events {
		var set map[string]bool
		id := e.JobID
		switch {
		case e.Kind == "run" && runstate.RunTerminal(store.RunStatus(e.Status)):
			set, id = n.ended, e.RunID
		case e.Kind == "job" && e.Status == string(store.JobQueued):
			set = n.queued
		case e.Kind == "job" && e.Status == string(store.JobFailure):
			set = n.failed
		default:
			continue
		}
		woke = true
		if len(n.ended)+len(n.queued)+len(n.failed) >= maxNoted {
			n.sweep = true
			continue
		}
		set[id] = true
	}
	n.mu.Unlock()
	if woke {
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
}

// take returns what was noted and forgets it.
func (n *concurrencyNotes) take() (ended, queued, failed []string, sweep bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	keys := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		clear(m)
		slices.Sort(out)
		return out
	}
	sweep, n.sweep = n.sweep, false
	return keys(n.ended), keys(n.queued), keys(n.failed), sweep
}

// RunConcurrency settles, until ctx ends, the groups of the runs and
// jobs the scheduler's events name (see the comment at the top of this
// file), and sweeps every group at start and every Config.ConcurrencySweep.
// Each orchestrator runs it: every decision is taken under the group's
// lock, so several sweeping at once cancel nothing twice that matters
// and start nothing twice.
func (s *Scheduler) RunConcurrency(ctx context.Context) {
	every := s.cfg.ConcurrencySweep
	if every <= 0 {
		every = defaultConcurrencySweep
	}
	t := time.NewTicker(every)
	defer t.Stop()
	sweep := true
	for {
		if sweep {
			if err := s.SweepConcurrency(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("concurrency sweep failed", "error", err)
			}
		} else if err := s.settleNoted(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("settle concurrency groups failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.conc.kick:
			sweep = false
		case <-t.C:
			sweep = true
		}
	}
}

// settleNoted settles the groups of what was noted since the last time.
func (s *Scheduler) settleNoted(ctx context.Context) error {
	ended, queued, failed, sweep := s.conc.take()
	if sweep {
		return s.SweepConcurrency(ctx)
	}
	var errs []error
	if len(ended) > 0 {
		groups, err := s.db.RunGroupsOf(ctx, ended)
		errs = append(errs, err)
		for _, g := range groups {
			errs = append(errs, s.settleRunGroup(ctx, g))
		}
	}
	if len(queued) > 0 {
		groups, err := s.db.JobGroupsOf(ctx, queued)
		errs = append(errs, err)
		for _, g := range groups {
			errs = append(errs, s.settleJobGroup(ctx, g))
		}
	}
	if len(failed) > 0 {
		errs = append(errs, s.failFast(ctx, failed))
	}
	return errors.Join(errs...)
}

// SweepConcurrency settles every group that may need it: the workflow-level
// groups with a waiting run, the job-level groups with more than one job
// in the queue, and the fail-fast matrices with a failed combination whose
// siblings have not ended; and it drops the lock rows of groups unused for
// a day. It is what RunConcurrency does now and then;
// tests call it to settle at a moment of their choosing.
func (s *Scheduler) SweepConcurrency(ctx context.Context) error {
	var errs []error
	groups, err := s.db.RunGroupsWaiting(ctx)
	errs = append(errs, err)
	for _, g := range groups {
		errs = append(errs, s.settleRunGroup(ctx, g))
	}
	jobGroups, err := s.db.JobGroupsContended(ctx)
	errs = append(errs, err)
	for _, g := range jobGroups {
		errs = append(errs, s.settleJobGroup(ctx, g))
	}
	errs = append(errs, s.failFast(ctx, nil))
	_, err = s.db.PruneConcurrencyLocks(ctx, s.cfg.Now().Add(-lockIdle))
	errs = append(errs, err)
	return errors.Join(errs...)
}

// lockIdle is how long a group's lock row is kept unused (see
// store.PruneConcurrencyLocks).
const lockIdle = 24 * time.Hour

// groupCancel is a cancel a group decided: the whole run, or the given
// jobs of it.
type groupCancel struct {
	runID  string
	jobIDs []string // nil: every job of the run
	reason string
}

// runGroupPlan is what a workflow-level group's members call for.
type runGroupPlan struct {
	cancels []groupCancel
	// start is the waiting run to start; "" for none.
	start string
	// holder is the run the waiting ones wait for.
	holder string
}

// decideRunGroup applies the workflow-level rules to a group's unfinished
// members, oldest first:
//
//   - the newest member with cancel-in-progress cancels every member older
//     than itself, in progress or waiting;
//   - of the waiting members (not cancelled) only the newest waits: the
//     others are cancelled as superseded;
//   - when no member is active, the newest waiting one starts.
//
// A member cancelled but still running stays active until it ends, so
// the run it made way for starts only then.
func decideRunGroup(group string, members []store.RunGroup) runGroupPlan {
	var p runGroupPlan
	cancelled := map[string]bool{}
	for i := len(members) - 1; i >= 0; i-- {
		c := members[i]
		if !c.CancelInProgress {
			continue
		}
		for _, m := range members[:i] {
			cancelled[m.RunID] = true
			p.cancels = append(p.cancels, groupCancel{runID: m.RunID, reason: fmt.Sprintf(
				"cancelled by run %s: concurrency group %q has cancel-in-progress, and the newer run takes its place", c.RunID, group)})
		}
		break
	}
	newest := ""
	for i := len(members) - 1; i >= 0; i-- {
		m := members[i]
		if m.State != store.RunGroupWaiting || cancelled[m.RunID] {
			continue
		}
		if newest == "" {
			newest = m.RunID
			continue
		}
		p.cancels = append(p.cancels, groupCancel{runID: m.RunID, reason: fmt.Sprintf(
			"superseded by run %s in concurrency group %q: of the runs waiting for the group, only the newest waits", newest, group)})
	}
	for _, m := range members {
		if m.State == store.RunGroupActive {
			p.holder = m.RunID
			break
		}
	}
	if p.holder == "" {
		p.start = newest
	}
	return p
}

// waitNote is the error of a run waiting for its group, until it starts.
func waitNote(group, holder string) string {
	return fmt.Sprintf("waiting for concurrency group %q (run %s is in it)", group, holder)
}

// joinConcurrency records, in the transaction creating run, the limits
// of its jobs (before any of them can be claimed) and, when group is not
// "", puts the run in its workflow-level group (joinRunGroup).
func (s *Scheduler) joinConcurrency(ctx context.Context, tx *store.Tx, run *store.Run, group string, c *workflow.Concurrency, await bool) ([]groupCancel, error) {
	if err := tx.AddJobConcurrency(ctx, jobLimits(*run)); err != nil {
		return nil, err
	}
	if group == "" {
		return nil, nil
	}
	return s.joinRunGroup(ctx, tx, run, store.GroupRef{Source: run.Source, Group: group}, c, await)
}

// countQueued counts the job queued events.
func countQueued(events []apiv1.Event) int {
	n := 0
	for _, e := range events {
		if e.Kind == "job" && e.Status == string(store.JobQueued) {
			n++
		}
	}
	return n
}

// afterJoin follows the commit of a run's creation: it makes the cancels
// its arrival in its group decided, and notes its jobs of a job-level
// group that it queued at once (their queued events are not published)
// for the loop to settle their groups.
func (s *Scheduler) afterJoin(ctx context.Context, run store.Run, cancels []groupCancel) {
	var queued []apiv1.Event
	for _, j := range run.Jobs {
		if j.Status == store.JobQueued && j.Spec.Concurrency != nil {
			queued = append(queued, apiv1.Event{Kind: "job", RunID: run.ID, JobID: j.ID, Status: string(store.JobQueued)})
		}
	}
	s.conc.note(queued)
	s.cancelForGroup(ctx, cancels)
}

// cancelForGroup makes the cancels a run's arrival in its group decided,
// once the arrival committed. A failure is logged: the next sweep makes
// the same decision and tries again.
func (s *Scheduler) cancelForGroup(ctx context.Context, cancels []groupCancel) {
	if len(cancels) == 0 {
		return
	}
	if err := s.applyCancels(context.WithoutCancel(ctx), cancels); err != nil {
		s.log.Warn("concurrency group cancel failed; the next sweep tries again", "error", err)
	}
}

// joinRunGroup puts a run being created (in tx, which wrote it) in its
// workflow-level group: a run awaiting approval is only recorded; any
// other joins as the newest member and either starts at once (the group
// is free) or waits, its error saying for whom. It returns the cancels the
// run's arrival calls for, to make once tx committed (applyCancels).
func (s *Scheduler) joinRunGroup(ctx context.Context, tx *store.Tx, run *store.Run, g store.GroupRef, c *workflow.Concurrency, await bool) ([]groupCancel, error) {
	m := store.RunGroup{RunID: run.ID, Source: g.Source, Group: g.Group, CancelInProgress: c.CancelInProgress, State: store.RunGroupWaiting}
	if await {
		m.State = store.RunGroupApproval
		_, err := tx.JoinRunGroup(ctx, m)
		return nil, err
	}
	if err := tx.LockRunGroup(ctx, g); err != nil {
		return nil, err
	}
	if _, err := tx.JoinRunGroup(ctx, m); err != nil {
		return nil, err
	}
	return s.placeNewcomer(ctx, tx, run, g)
}

// enterApprovedRun puts a run just approved (in tx) in its workflow-level
// group, as joinRunGroup does at creation, if it has one.
func (s *Scheduler) enterApprovedRun(ctx context.Context, tx *store.Tx, runID string) ([]groupCancel, error) {
	m, ok, err := tx.GetRunGroup(ctx, runID)
	if err != nil || !ok || m.State != store.RunGroupApproval {
		return nil, err
	}
	g := store.GroupRef{Source: m.Source, Group: m.Group}
	if err := tx.LockRunGroup(ctx, g); err != nil {
		return nil, err
	}
	if _, _, err := tx.EnterRunGroup(ctx, runID); err != nil {
		return nil, err
	}
	return s.placeNewcomer(ctx, tx, &store.Run{ID: runID}, g)
}

// placeNewcomer decides, under the group's lock, about the group's newest
// member run: it starts, or waits with its error saying for whom. Being
// the newest, it is the only member that can start now.
func (s *Scheduler) placeNewcomer(ctx context.Context, tx *store.Tx, run *store.Run, g store.GroupRef) ([]groupCancel, error) {
	members, err := tx.ListRunGroup(ctx, g)
	if err != nil {
		return nil, err
	}
	p := decideRunGroup(g.Group, members)
	for _, c := range p.cancels {
		if err := tx.SetRunGroupCancelNote(ctx, c.runID, c.reason); err != nil {
			return nil, err
		}
	}
	if p.start == run.ID {
		_, err := tx.StartRunGroupMember(ctx, run.ID)
		return p.cancels, err
	}
	note := waitNote(g.Group, p.holder)
	if _, err := tx.SetPendingRunError(ctx, run.ID, note); err != nil {
		return nil, err
	}
	run.Error = note
	return p.cancels, nil
}

// runHeld reports whether advance must queue nothing of the run: it waits
// for its workflow-level group (or awaits approval in one). It also
// returns the run's membership, for endNote.
func (s *Scheduler) runHeld(ctx context.Context, tx *store.Tx, runID string) (store.RunGroup, bool, error) {
	m, ok, err := tx.GetRunGroup(ctx, runID)
	if err != nil || !ok {
		return store.RunGroup{}, false, err
	}
	return m, m.State != store.RunGroupActive, nil
}

// endNote is the error a run ends with: its group's reason for cancelling
// it when it ends cancelled and its group cancelled it, msg otherwise.
func endNote(m store.RunGroup, to store.RunStatus, msg string) string {
	if to == store.RunCancelled && m.CancelNote != "" {
		return m.CancelNote
	}
	return msg
}

// settleRunGroup applies decideRunGroup to a workflow-level group: under
// its lock it notes why the runs it cancels are cancelled and starts the
// waiting run the group lets start (queuing its root jobs); once that
// committed, it cancels.
func (s *Scheduler) settleRunGroup(ctx context.Context, g store.GroupRef) error {
	var events []apiv1.Event
	var cancels []groupCancel
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		events, cancels = nil, nil
		if err := tx.LockRunGroup(ctx, g); err != nil {
			return err
		}
		members, err := tx.ListRunGroup(ctx, g)
		if err != nil {
			return err
		}
		p := decideRunGroup(g.Group, members)
		for _, c := range p.cancels {
			if err := tx.SetRunGroupCancelNote(ctx, c.runID, c.reason); err != nil {
				return err
			}
		}
		cancels = p.cancels
		if p.start == "" {
			return nil
		}
		started, err := tx.StartRunGroupMember(ctx, p.start)
		if err != nil || !started {
			return err
		}
		events = append(events, apiv1.Event{Kind: "run", RunID: p.start, Status: string(store.RunPending)})
		more, err := s.advance(ctx, tx, p.start)
		events = append(events, more...)
		return err
	})
	if err != nil {
		return fmt.Errorf("settle concurrency group %q of source %q: %w", g.Group, g.Source, err)
	}
	if len(events) > 0 {
		s.log.Info("run started: its concurrency group is free", "run_id", events[0].RunID, "group", g.Group, "source", g.Source)
		s.Publish(events)
	}
	return s.applyCancels(ctx, cancels)
}

// decideJobGroup applies the job-level rules to a group's members (its
// jobs in the queue), oldest first. They are the workflow-level rules, per
// job; a job never cancels a job of its own run, whose jobs of one group
// take their turns in queue order:
//
//   - the newest member with cancel-in-progress cancels the older members
//     of other runs, dispatched or queued;
//   - of the queued members, those of other runs than the newest queued
//     one's, and older, are cancelled as superseded.
func decideJobGroup(group string, members []store.JobGroupMember) []groupCancel {
	cancelled := map[string]bool{}
	var out []groupCancel
	add := func(m store.JobGroupMember, reason string) {
		if cancelled[m.JobID] {
			return
		}
		cancelled[m.JobID] = true
		if n := len(out); n > 0 && out[n-1].runID == m.RunID && out[n-1].reason == reason {
			out[n-1].jobIDs = append(out[n-1].jobIDs, m.JobID)
			return
		}
		out = append(out, groupCancel{runID: m.RunID, jobIDs: []string{m.JobID}, reason: reason})
	}
	for i := len(members) - 1; i >= 0; i-- {
		c := members[i]
		if !c.CancelInProgress {
			continue
		}
		for _, m := range members[:i] {
			if m.RunID != c.RunID {
				add(m, fmt.Sprintf("cancelled by run %s job %s: concurrency group %q has cancel-in-progress, and the newer job takes its place",
					c.RunID, c.Job, group))
			}
		}
		break
	}
	for i := len(members) - 1; i >= 0; i-- {
		q := members[i]
		if q.Dispatched || cancelled[q.JobID] {
			continue
		}
		for _, m := range members[:i] {
			if !m.Dispatched && m.RunID != q.RunID {
				add(m, fmt.Sprintf("superseded by run %s job %s in concurrency group %q: of the jobs waiting for the group, only the newest waits",
					q.RunID, q.Job, group))
			}
		}
		break
	}
	return out
}

// settleJobGroup applies decideJobGroup to a job-level group. Which job
// of the group is dispatched is the claims' business (store.ClaimForAgent);
// this only cancels.
func (s *Scheduler) settleJobGroup(ctx context.Context, g store.GroupRef) error {
	members, err := s.db.ListJobGroup(ctx, g)
	if err != nil {
		return err
	}
	return s.applyCancels(ctx, decideJobGroup(g.Group, members))
}

// failFast cancels the unfinished siblings of the given failed jobs (nil:
// of every failed job of an unfinished run) that are fail-fast matrix
// combinations.
func (s *Scheduler) failFast(ctx context.Context, failedJobIDs []string) error {
	list, err := s.db.ListFailFast(ctx, failedJobIDs)
	if err != nil {
		return err
	}
	var cancels []groupCancel
	for _, f := range list {
		cancels = append(cancels, groupCancel{runID: f.RunID, jobIDs: f.Others, reason: fmt.Sprintf(
			"cancelled: matrix job %q failed, and %q has fail-fast", f.Job, f.Base)})
	}
	return s.applyCancels(ctx, cancels)
}

// applyCancels makes the cancels a group decided, through the Canceller.
// A run or job that has ended meanwhile, or been deleted, is no error.
func (s *Scheduler) applyCancels(ctx context.Context, cancels []groupCancel) error {
	c := s.canceller()
	var errs []error
	for _, gc := range cancels {
		var err error
		if gc.jobIDs == nil {
			err = c.CancelRun(ctx, gc.runID, gc.reason)
		} else {
			err = c.CancelJobs(ctx, gc.runID, gc.jobIDs, gc.reason)
		}
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cancel run %q for its concurrency group: %w", gc.runID, err))
			continue
		}
		s.log.Info("cancelled for a concurrency group or fail-fast", "run_id", gc.runID, "jobs", len(gc.jobIDs), "reason", gc.reason)
	}
	return errors.Join(errs...)
}

func (s *Scheduler) canceller() Canceller {
	if c, ok := s.queue.(Canceller); ok {
		return c
	}
	return localCanceller{s}
}

// localCanceller is the Canceller of a scheduler without a dispatcher:
// with no agent to tell, it ends the jobs itself.
type localCanceller struct{ s *Scheduler }

func (c localCanceller) CancelRun(ctx context.Context, runID, reason string) error {
	return c.cancel(ctx, runID, nil, reason)
}

func (c localCanceller) CancelJobs(ctx context.Context, runID string, jobIDs []string, reason string) error {
	return c.cancel(ctx, runID, jobIDs, reason)
}

func (c localCanceller) cancel(ctx context.Context, runID string, only []string, reason string) error {
	s := c.s
	var events []apiv1.Event
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		events = nil
		run, err := tx.GetRun(ctx, runID)
		if err != nil {
			return err
		}
		now := s.cfg.Now()
		for _, j := range run.Jobs {
			if runstate.JobTerminal(j.Status) || (only != nil && !slices.Contains(only, j.ID)) {
				continue
			}
			if err := s.endJobUnrun(ctx, tx, j, store.JobCancelled, reason, now); err != nil {
				return err
			}
			events = append(events, apiv1.Event{Kind: "job", RunID: runID, Job: j.Name, JobID: j.ID, Status: string(store.JobCancelled), Error: reason})
		}
		more, err := s.advance(ctx, tx, runID)
		events = append(events, more...)
		return err
	})
	if err != nil {
		return err
	}
	s.Publish(events)
	return nil
}

// jobLimits are the job_concurrency rows of a run's jobs: those with a
// job-level group, and the combinations of a matrix with fail-fast or
// max-parallel.
func jobLimits(run store.Run) []store.JobConcurrency {
	var out []store.JobConcurrency
	for _, j := range run.Jobs {
		spec := j.Spec
		row := store.JobConcurrency{JobID: j.ID, RunID: run.ID, Source: run.Source}
		if c := spec.Concurrency; c != nil && c.Group != "" {
			row.Group, row.CancelInProgress = c.Group, c.CancelInProgress
		}
		if spec.Matrix != nil && (spec.FailFast || spec.MaxParallel > 0) {
			row.Base, row.FailFast, row.MaxParallel = spec.Base, spec.FailFast, spec.MaxParallel
		}
		if row.Group != "" || row.Base != "" {
			out = append(out, row)
		}
	}
	return out
}
