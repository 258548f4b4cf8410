package schedules

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/pipeline"
	"github.com/kici-dev/kici/internal/scheduler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

const everyMinute = `name: every-minute
on:
  schedule:
    - cron: "* * * * *"
jobs:
  tick:
    runs-on: [linux]
    steps:
      - run: echo tick
`

// twoSpecs has two schedules that coincide at 10:00 every day.
const twoSpecs = `name: two-specs
on:
  schedule:
    - cron: "0 * * * *"
    - cron: "0 10 * * *"
  push: {}
jobs:
  a:
    runs-on: [linux]
    steps:
      - run: echo a
`

const pushOnly = `name: push-only
on: push
jobs:
  a:
    runs-on: [linux]
    steps:
      - run: echo a
`

// countingPipeline counts the reads of a source, to show that ticks are
// started from the cache.
type countingPipeline struct {
	*pipeline.Pipeline
	heads, reads atomic.Int32
}

func (c *countingPipeline) DefaultHead(ctx context.Context, source string) (string, error) {
	c.heads.Add(1)
	return c.Pipeline.DefaultHead(ctx, source)
}

func (c *countingPipeline) SchedulesAt(ctx context.Context, source, sha string) (pipeline.ScheduleSet, error) {
	c.reads.Add(1)
	return c.Pipeline.SchedulesAt(ctx, source, sha)
}

type fixture struct {
	db   *store.DB
	repo string
}

// newFixture opens a SQLite store in a temporary directory and registers
// a local source "app" over a git repository holding files.
func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(t.Context(), store.Config{DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, repo: filepath.Join(dir, "repo")}
	git(t, "", "init", "-q", "-b", "main", f.repo)
	f.commit(t, files)
	if _, err := db.CreateSource(t.Context(), store.Source{Name: "app", Kind: "local", Location: f.repo}); err != nil {
		t.Fatal(err)
	}
	return f
}

// commit writes files (an empty content removes the file) and commits
// them on main.
func (f *fixture) commit(t *testing.T, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(f.repo, filepath.FromSlash(name))
		if content == "" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, f.repo, "add", "-A")
	git(t, f.repo, "-c", "user.name=kici test", "-c", "user.email=test@kici.invalid", "-c", "commit.gpgsign=false",
		"commit", "-q", "--allow-empty", "-m", "change")
}

// scheduler returns a schedules.Scheduler over the fixture's database, as
// one orchestrator would build it, with its clock at *now.
func (f *fixture) scheduler(t *testing.T, now *time.Time) (*Scheduler, *countingPipeline) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	runs := scheduler.New(logger, f.db, scheduler.Config{}, nil, nil)
	pipe := &countingPipeline{Pipeline: pipeline.New(logger, f.db, runs, pipeline.Config{DataDir: t.TempDir()})}
	return New(logger, pipe, f.db, Config{Now: func() time.Time { return *now }}), pipe
}

// scheduledRuns lists the runs of a workflow with the tick of each.
func (f *fixture) scheduledRuns(t *testing.T, wf string) map[time.Time]int {
	t.Helper()
	runs, err := f.db.ListRuns(t.Context(), store.RunFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ticks := map[time.Time]int{}
	for _, r := range runs {
		if r.Workflow != wf {
			continue
		}
		var ev struct {
			Kind string    `json:"kind"`
			Tick time.Time `json:"tick"`
		}
		if err := json.Unmarshal(r.Event, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind != "schedule" || r.EventKind != "schedule" {
			t.Errorf("run %s of %s: event kind %q (column %q), want schedule", r.ID, wf, ev.Kind, r.EventKind)
		}
		ticks[ev.Tick]++
	}
	return ticks
}

func at(hh, mm, ss int) time.Time { return time.Date(2026, 12, 2, hh, mm, ss, 0, time.UTC) }

func TestOneRunPerTickAcrossSchedulers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{".kici/workflows/minute.yml": everyMinute, ".kici/workflows/push.yml": pushOnly})
	now := at(9, 59, 30)
	a, pipeA := f.scheduler(t, &now)
	b, _ := f.scheduler(t, &now) // a second orchestrator on the same database
	for _, s := range []*Scheduler{a, b} {
		s.started = now
		s.RefreshAll(t.Context())
	}
	// Both wake for 10:00 and 10:01; each tick starts one run.
	for _, wake := range []time.Time{at(10, 0, 0), at(10, 0, 1), at(10, 1, 0)} {
		now = wake
		a.FireDue(t.Context(), wake.Add(-time.Minute), wake)
		b.FireDue(t.Context(), wake.Add(-time.Minute), wake)
	}
	got := f.scheduledRuns(t, "every-minute")
	if len(got) != 2 || got[at(10, 0, 0)] != 1 || got[at(10, 1, 0)] != 1 {
		t.Errorf("runs per tick: got %v, want one at 10:00 and one at 10:01", got)
	}
	if n := len(f.scheduledRuns(t, "push-only")); n != 0 {
		t.Errorf("push-only workflow: got %d scheduled runs, want none", n)
	}
	if h, r := pipeA.heads.Load(), pipeA.reads.Load(); h != 1 || r != 1 {
		t.Errorf("reads of the source while firing: got %d head resolutions and %d workflow reads, want 1 and 1 (the refresh only)", h, r)
	}
}

func TestMissedTicksAreNotReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{".kici/workflows/minute.yml": everyMinute, ".kici/workflows/two.yml": twoSpecs})
	now := at(9, 30, 30)
	s, _ := f.scheduler(t, &now)
	s.started = now
	s.RefreshAll(t.Context())
	// Ticks before the start are never started, however wide the window.
	s.FireDue(t.Context(), at(9, 0, 0), now)
	if got := f.scheduledRuns(t, "every-minute"); len(got) != 0 {
		t.Fatalf("ticks before the start: got runs %v, want none", got)
	}
	// A late wake (a paused process) starts only the newest tick it
	// missed; two specs of one workflow ticking together start one run.
	now = at(10, 5, 10)
	s.FireDue(t.Context(), at(9, 30, 30), now)
	if got := f.scheduledRuns(t, "every-minute"); len(got) != 1 || got[at(10, 5, 0)] != 1 {
		t.Errorf("late wake: got runs %v, want one, at 10:05", got)
	}
	if got := f.scheduledRuns(t, "two-specs"); len(got) != 1 || got[at(10, 0, 0)] != 1 {
		t.Errorf("two specs ticking at 10:00: got runs %v, want one, at 10:00", got)
	}
}

func TestScheduleCacheFollowsTheDefaultBranch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{".kici/workflows/push.yml": pushOnly})
	now := at(10, 0, 30)
	s, pipe := f.scheduler(t, &now)
	s.started = now
	s.RefreshAll(t.Context())
	if l, _ := s.ListSchedules(t.Context()); len(l.Schedules) != 0 {
		t.Fatalf("no schedule yet: got %+v", l.Schedules)
	}
	// A push adds a schedule and an invalid file: until the source is
	// read again, nothing ticks.
	f.commit(t, map[string]string{".kici/workflows/minute.yml": everyMinute, ".kici/workflows/bad.yml": "name: bad\non: {schedule: [{cron: \"@every 1m\"}]}\njobs: {}\n"})
	now = at(10, 1, 5)
	s.FireDue(t.Context(), at(10, 0, 30), now)
	if got := f.scheduledRuns(t, "every-minute"); len(got) != 0 {
		t.Fatalf("before the refresh: got runs %v, want none", got)
	}
	s.Kick("app")
	s.refreshDirty(t.Context())
	l, err := s.ListSchedules(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Schedules) != 1 || l.Schedules[0].Workflow != "every-minute" || l.Schedules[0].NextTick == nil || !l.Schedules[0].NextTick.Equal(at(10, 2, 0)) || l.Schedules[0].LastRun != nil {
		t.Fatalf("after the refresh: got %+v, want every-minute, next tick 10:02, no last run", l.Schedules)
	}
	if len(l.Problems) != 1 || !strings.Contains(l.Problems[0].Error, "bad.yml") || !strings.Contains(l.Problems[0].Error, "@every") {
		t.Errorf("problems: got %+v, want bad.yml's @every", l.Problems)
	}
	// The schedule is owed the ticks after it was read, not the 10:01
	// tick that passed before.
	now = at(10, 2, 0)
	s.FireDue(t.Context(), at(10, 1, 5), now)
	if got := f.scheduledRuns(t, "every-minute"); len(got) != 1 || got[at(10, 2, 0)] != 1 {
		t.Errorf("after the refresh: got runs %v, want one, at 10:02", got)
	}
	l, _ = s.ListSchedules(t.Context())
	if lr := l.Schedules[0].LastRun; lr == nil || !lr.Tick.Equal(at(10, 2, 0)) || lr.Status == "" {
		t.Errorf("last run: got %+v, want the 10:02 run with its status", lr)
	}
	// Reading again finds the same head and reads no workflows.
	reads := pipe.reads.Load()
	s.RefreshAll(t.Context())
	if pipe.reads.Load() != reads {
		t.Errorf("a refresh at an unchanged head read the workflows again")
	}
	// A removed source's schedules go.
	if err := f.db.DeleteSource(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	s.RefreshAll(t.Context())
	if l, _ := s.ListSchedules(t.Context()); len(l.Schedules) != 0 || len(l.Problems) != 0 {
		t.Errorf("after the source was removed: got %+v", l)
	}
}

func TestNewestTick(t *testing.T) {
	t.Parallel()
	sched, err := workflow.ParseCron("*/10 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, now time.Time
		tick      time.Time
		missed    int
	}{
		{from: at(10, 0, 0), now: at(10, 0, 0)},                                  // (from, now] is empty
		{from: at(9, 59, 59), now: at(10, 0, 0), tick: at(10, 0, 0)},             // the tick at now is due
		{from: at(10, 0, 0), now: at(10, 9, 59)},                                 // the tick at from was started before
		{from: at(10, 0, 0), now: at(10, 35, 0), tick: at(10, 30, 0), missed: 2}, // 10:10 and 10:20 were missed
		{from: at(10, 0, 0).Add(-72 * time.Hour), now: at(10, 0, 0), tick: at(10, 0, 0), missed: int(lookBack/(10*time.Minute)) - 1},
	} {
		tick, missed := newestTick(sched, tc.from, tc.now)
		if !tick.Equal(tc.tick) || missed != tc.missed {
			t.Errorf("newestTick(%v, %v): got (%v, %d), want (%v, %d)", tc.from, tc.now, tick, missed, tc.tick, tc.missed)
		}
	}
}

// git runs git in dir (the working directory when empty), isolated from
// the user's and the system's configuration.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
