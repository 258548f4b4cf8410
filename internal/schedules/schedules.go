// Package schedules starts the runs of `on: schedule` workflows: at each
// tick of a workflow's cron spec (UTC), one run at its source's default
// branch head.
//
// The workflows come from a cache, not from git at each tick: every
// source's default branch head is read at start, after each branch push
// to the source (Kick), and every Config.Refresh; a head already read is
// not read again. A tick starts at most one run per source and workflow
// however many orchestrators share the database: the run's creation
// claims the tick in the same transaction (store.ClaimScheduleTick), and
// the orchestrator that loses the claim creates nothing. Ticks from
// before the scheduler started are not replayed, and when the scheduler
// wakes late (a paused process) it starts only the newest tick it
// missed, once.
//
// A *Scheduler is safe for concurrent use.
package schedules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/pipeline"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
	"github.com/robfig/cron/v3"
)

// DefaultRefresh is how often every source's default branch is read
// again when Config.Refresh is zero (KICI_SCHEDULE_REFRESH_MS).
const DefaultRefresh = 5 * time.Minute

const (
	// sourceReadTimeout bounds the read of one source's head and
	// workflows, so one unreachable remote does not stall the others.
	sourceReadTimeout = 2 * time.Minute
	// lookBack bounds how far back a late wake looks for the newest
	// missed tick (a longer pause misses its ticks altogether).
	lookBack = 48 * time.Hour
	// keepFires is how long claimed ticks are kept (the newest one of
	// each workflow is kept always); prunedEvery how often older ones are
	// deleted.
	keepFires   = 7 * 24 * time.Hour
	prunedEvery = time.Hour
	// lateWarning is how late a tick may start before a warning says so.
	lateWarning = time.Minute
)

// Pipeline reads a source's workflows and starts scheduled runs; a
// *pipeline.Pipeline is one.
type Pipeline interface {
	DefaultHead(ctx context.Context, source string) (string, error)
	SchedulesAt(ctx context.Context, source, sha string) (pipeline.ScheduleSet, error)
	StartScheduled(ctx context.Context, source, sha string, wf workflow.Workflow, cron string, tick time.Time) (store.Run, error)
}

// Store lists the sources and the ticks that started runs; a *store.DB is
// one.
type Store interface {
	ListSources(ctx context.Context) ([]store.Source, error)
	LastScheduleFires(ctx context.Context) ([]store.ScheduleFire, error)
	PruneScheduleFires(ctx context.Context, before time.Time) (int64, error)
}

// Config tunes the scheduler.
type Config struct {
	// Refresh is how often every source is read again; zero means
	// DefaultRefresh.
	Refresh time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Scheduler starts scheduled runs. Build it with New, then call Run.
type Scheduler struct {
	log  *slog.Logger
	pipe Pipeline
	db   Store
	cfg  Config

	kickRefresh chan struct{} // a source was pushed to
	kickFire    chan struct{} // the cache changed

	mu          sync.Mutex
	sources     map[string]*sourceEntry
	dirty       map[string]bool // sources to read again at once
	refreshedAt time.Time       // of the last full refresh
	started     time.Time       // ticks up to this are not started
}

// sourceEntry is the cached schedules of one source.
type sourceEntry struct {
	// sha is the head last read completely (its workflows read, valid or
	// not); a refresh that finds the same head reads nothing more.
	sha   string
	specs []*spec
	// invalid lists the problems of the files at sha that did not
	// compile (and of specs that do not parse); readErr is why the last
	// refresh could not read the source. Empty when none.
	invalid, readErr     string
	invalidAt, readErrAt time.Time
	// startErr is the last failure to start a tick's run; cleared by the
	// next success.
	startErr   string
	startErrAt time.Time
}

// spec is one schedule trigger of one workflow.
type spec struct {
	wf    workflow.Workflow
	cron  string
	sched cron.Schedule
	// since is when the spec entered the cache: its ticks up to then
	// are not started (the workflow did not have it yet, or the
	// scheduler had not started).
	since time.Time
}

// New returns a scheduler; nothing runs before Run.
func New(logger *slog.Logger, pipe Pipeline, db Store, cfg Config) *Scheduler {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{
		log: logger, pipe: pipe, db: db, cfg: cfg,
		kickRefresh: make(chan struct{}, 1), kickFire: make(chan struct{}, 1),
		sources: map[string]*sourceEntry{}, dirty: map[string]bool{},
	}
}

// Kick asks for source's default branch to be read again soon (after a
// push to it). It never blocks.
func (s *Scheduler) Kick(source string) {
	s.mu.Lock()
	s.dirty[source] = true
	s.mu.Unlock()
	select {
	case s.kickRefresh <- struct{}{}:
	default:
	}
}

// Run reads every source, then starts each tick's runs and keeps the
// cache fresh until ctx ends. Ticks before Run was called are not started.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	s.started = s.cfg.Now()
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { s.refreshLoop(ctx) })
	s.fireLoop(ctx)
	wg.Wait()
	return nil
}

func (s *Scheduler) refreshLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.Refresh)
	defer t.Stop()
	var lastPrune time.Time
	for {
		s.RefreshAll(ctx)
		if now := s.cfg.Now(); now.Sub(lastPrune) >= prunedEvery {
			lastPrune = now
			s.prune(ctx, now)
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				break wait
			case <-s.kickRefresh:
				s.refreshDirty(ctx)
			}
		}
	}
}

// fireLoop sleeps until the next tick of any cached spec (or a change of
// the cache) and starts what is due, until ctx ends.
func (s *Scheduler) fireLoop(ctx context.Context) {
	s.mu.Lock()
	since := s.started
	s.mu.Unlock()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.cfg.Now()
		s.FireDue(ctx, since, now)
		since = now
		wait := s.cfg.Refresh
		if next, ok := s.nextTick(now); ok {
			wait = min(wait, next.Sub(now))
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.kickFire:
		}
	}
}

// nextTick is the first tick after now of every cached spec.
func (s *Scheduler) nextTick(now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, e := range s.sources {
		for _, sp := range e.specs {
			if t := sp.sched.Next(now.UTC()); !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next, !next.IsZero()
}

// due is one run a tick owes.
type due struct {
	source, sha string
	spec        *spec
	tick        time.Time
}

// FireDue starts the runs of the ticks in (since, now]: for each workflow
// of each source, one run for the newest tick of its specs in that window
// (a later one than a spec's arrival in the cache). An older tick in the
// window was missed and is only logged.
func (s *Scheduler) FireDue(ctx context.Context, since, now time.Time) {
	for _, d := range s.dueBetween(since, now) {
		if ctx.Err() != nil {
			return
		}
		run, err := s.pipe.StartScheduled(ctx, d.source, d.sha, d.spec.wf, d.spec.cron, d.tick)
		attrs := []any{"source", d.source, "workflow", d.spec.wf.Name, "cron", d.spec.cron, "tick", d.tick.Format(time.RFC3339)}
		switch {
		case errors.Is(err, scheduler.ErrTickTaken):
			s.log.Debug("schedule tick already started elsewhere", attrs...)
			s.noteStart(d.source, nil)
		case err != nil:
			if ctx.Err() == nil {
				s.log.Error("schedule tick could not start its run", append(attrs, "error", err)...)
				s.noteStart(d.source, fmt.Errorf("tick %s of workflow %s (%s): %w", d.tick.Format(time.RFC3339), d.spec.wf.Name, d.spec.cron, err))
			}
		default:
			if late := now.Sub(d.tick); late > lateWarning {
				s.log.Warn("schedule tick started late", append(attrs, "late", late.Round(time.Second).String())...)
			}
			s.log.Info("scheduled run started", append(attrs, "run_id", run.ID)...)
			s.noteStart(d.source, nil)
		}
	}
}

// dueBetween lists what FireDue starts, by source and workflow.
func (s *Scheduler) dueBetween(since, now time.Time) []due {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []due
	for _, name := range sortedKeys(s.sources) {
		e := s.sources[name]
		byWorkflow := map[string]int{} // index in out
		for _, sp := range e.specs {
			from := since
			if sp.since.After(from) {
				from = sp.since
			}
			tick, missed := newestTick(sp.sched, from, now)
			if tick.IsZero() {
				continue
			}
			if missed > 0 {
				s.log.Warn("schedule ticks missed (not replayed)", "source", name, "workflow", sp.wf.Name, "cron", sp.cron, "missed", missed)
			}
			if i, ok := byWorkflow[sp.wf.Name]; ok {
				// One run per workflow and tick: the newest tick wins,
				// the first spec on a tie.
				if tick.After(out[i].tick) {
					out[i].spec, out[i].tick = sp, tick
				}
				continue
			}
			byWorkflow[sp.wf.Name] = len(out)
			out = append(out, due{source: name, sha: e.sha, spec: sp, tick: tick})
		}
	}
	return out
}

// newestTick returns the newest tick of sched in (from, now] (zero when
// there is none) and how many older ones the window holds. It looks back
// at most lookBack from now.
func newestTick(sched cron.Schedule, from, now time.Time) (tick time.Time, missed int) {
	from, now = from.UTC(), now.UTC()
	if limit := now.Add(-lookBack); from.Before(limit) {
		from = limit
	}
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		if !tick.IsZero() {
			missed++
		}
		tick = t
	}
	return tick, missed
}

func (s *Scheduler) noteStart(source string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.sources[source]
	if e == nil {
		return
	}
	if err == nil {
		e.startErr, e.startErrAt = "", time.Time{}
		return
	}
	e.startErr, e.startErrAt = err.Error(), s.cfg.Now()
}

// RefreshAll reads every registered source again and drops the ones that
// are gone.
func (s *Scheduler) RefreshAll(ctx context.Context) {
	list, err := s.db.ListSources(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("schedules: list sources failed", "error", err)
		}
		return
	}
	names := make([]string, 0, len(list))
	for _, src := range list {
		names = append(names, src.Name)
	}
	s.mu.Lock()
	for name := range s.sources {
		if !slices.Contains(names, name) {
			delete(s.sources, name)
		}
	}
	clear(s.dirty)
	s.mu.Unlock()
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		s.refresh(ctx, name)
	}
	s.mu.Lock()
	s.refreshedAt = s.cfg.Now()
	s.mu.Unlock()
	s.wakeFire()
}

// refreshDirty reads the sources Kick named.
func (s *Scheduler) refreshDirty(ctx context.Context) {
	s.mu.Lock()
	names := sortedKeys(s.dirty)
	clear(s.dirty)
	s.mu.Unlock()
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		s.refresh(ctx, name)
	}
	s.wakeFire()
}

func (s *Scheduler) wakeFire() {
	select {
	case s.kickFire <- struct{}{}:
	default:
	}
}

// refresh reads one source's default branch head and, when it moved, the
// schedule triggers of its workflows there. A source that cannot be read
// keeps the schedules last read, with the error as its problem.
func (s *Scheduler) refresh(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, sourceReadTimeout)
	defer cancel()
	fail := func(err error) {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return // shutting down
		}
		s.log.Warn("schedules: read source failed; its schedules are those last read", "source", name, "error", err)
		s.mu.Lock()
		defer s.mu.Unlock()
		e := s.entry(name)
		e.readErr, e.readErrAt = err.Error(), s.cfg.Now()
	}
	sha, err := s.pipe.DefaultHead(ctx, name)
	if errors.Is(err, store.ErrNotFound) && s.sourceGone(ctx, name) {
		return
	}
	if err != nil {
		fail(err)
		return
	}
	s.mu.Lock()
	e := s.sources[name]
	unchanged := e != nil && e.sha == sha
	if unchanged {
		e.readErr, e.readErrAt = "", time.Time{}
	}
	s.mu.Unlock()
	if unchanged {
		return
	}
	set, err := s.pipe.SchedulesAt(ctx, name, sha)
	var invalid *pipeline.WorkflowError
	if err != nil && !errors.As(err, &invalid) {
		fail(err)
		return
	}
	// Every file invalid (err) or some (set.Invalid): the head's valid
	// workflows are what is scheduled; the problems are listed.
	var problems []string
	switch {
	case invalid != nil:
		problems = append(problems, invalid.Error())
	case set.Invalid != nil:
		problems = append(problems, set.Invalid.Error())
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e = s.entry(name)
	old := e.specs
	e.sha, e.specs = sha, nil
	for _, wf := range set.Workflows {
		for _, t := range wf.Triggers {
			if t.Type != workflow.TriggerSchedule {
				continue
			}
			sched, err := workflow.ParseCron(t.Cron)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: schedule %q: %v", wf.File, t.Cron, err))
				continue
			}
			// A schedule read for the first time is owed the ticks from
			// now on; one read by the first refresh, those since the
			// scheduler started; one read before, those it was owed.
			since := now
			if i := slices.IndexFunc(old, func(o *spec) bool { return o.wf.Name == wf.Name && o.cron == t.Cron }); i >= 0 {
				since = old[i].since
			} else if s.refreshedAt.IsZero() {
				since = s.started
			}
			e.specs = append(e.specs, &spec{wf: wf, cron: t.Cron, sched: sched, since: since})
		}
	}
	e.readErr, e.readErrAt = "", time.Time{}
	e.invalid, e.invalidAt = strings.Join(problems, "\n"), now
	if e.invalid == "" {
		e.invalidAt = time.Time{}
	}
	if len(old) != len(e.specs) {
		s.log.Info("schedules read", "source", name, "sha", sha, "schedules", len(e.specs))
	}
}

// sourceGone drops a source that no longer exists, and reports whether it
// did.
func (s *Scheduler) sourceGone(ctx context.Context, name string) bool {
	list, err := s.db.ListSources(ctx)
	if err != nil || slices.ContainsFunc(list, func(src store.Source) bool { return src.Name == name }) {
		return false
	}
	s.mu.Lock()
	delete(s.sources, name)
	s.mu.Unlock()
	return true
}

// entry returns the cached entry of a source, created empty; s.mu held.
func (s *Scheduler) entry(name string) *sourceEntry {
	e := s.sources[name]
	if e == nil {
		e = &sourceEntry{}
		s.sources[name] = e
	}
	return e
}

func (s *Scheduler) prune(ctx context.Context, now time.Time) {
	n, err := s.db.PruneScheduleFires(ctx, now.Add(-keepFires))
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("schedules: prune old ticks failed", "error", err)
	case n > 0:
		s.log.Debug("schedules: old ticks pruned", "count", n)
	}
}

// ListSchedules lists every cached schedule with its next tick and its
// workflow's last scheduled run, and the sources with a problem.
func (s *Scheduler) ListSchedules(ctx context.Context) (apiv1.ScheduleList, error) {
	fires, err := s.db.LastScheduleFires(ctx)
	if err != nil {
		return apiv1.ScheduleList{}, err
	}
	last := map[[2]string]*apiv1.ScheduledRun{}
	for _, f := range fires {
		last[[2]string{f.Source, f.Workflow}] = &apiv1.ScheduledRun{Tick: f.Tick.UTC(), RunID: f.RunID, Status: string(f.RunStatus)}
	}
	now := s.cfg.Now().UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := apiv1.ScheduleList{Schedules: []apiv1.Schedule{}, RefreshedAt: s.refreshedAt.UTC()}
	for _, name := range sortedKeys(s.sources) {
		e := s.sources[name]
		for _, sp := range e.specs {
			row := apiv1.Schedule{Source: name, Workflow: sp.wf.Name, File: sp.wf.File, Cron: sp.cron, SHA: e.sha,
				LastRun: last[[2]string{name, sp.wf.Name}]}
			if t := sp.sched.Next(now); !t.IsZero() {
				row.NextTick = &t
			}
			out.Schedules = append(out.Schedules, row)
		}
		var msgs []string
		var at time.Time
		for _, p := range []struct {
			prefix, msg string
			at          time.Time
		}{
			{"", e.readErr, e.readErrAt},
			{"", e.invalid, e.invalidAt},
			{"could not start a run: ", e.startErr, e.startErrAt},
		} {
			if p.msg == "" {
				continue
			}
			msgs = append(msgs, p.prefix+p.msg)
			if p.at.After(at) {
				at = p.at
			}
		}
		if len(msgs) > 0 {
			out.Problems = append(out.Problems, apiv1.ScheduleProblem{Source: name, Error: strings.Join(msgs, "\n"), At: at.UTC()})
		}
	}
	slices.SortStableFunc(out.Schedules, func(a, b apiv1.Schedule) int {
		return strings.Compare(a.Source+"\x00"+a.Workflow+"\x00"+a.Cron, b.Source+"\x00"+b.Workflow+"\x00"+b.Cron)
	})
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
