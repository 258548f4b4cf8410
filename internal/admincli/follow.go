package admincli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// The run statuses of CONTRACT.md. A run awaiting approval (a fork's pull
// request) has not started: `kici-admin runs approve ID` starts it.
const (
	runAwaitingApproval = "awaiting_approval"
	runPending          = "pending"
	runRunning          = "running"
	runSuccess          = "success"
	runFailure          = "failure"
	runCancelled        = "cancelled"
)

var runStatuses = []string{runAwaitingApproval, runPending, runRunning, runSuccess, runFailure, runCancelled}

// maxReconnects is how many times in a row a follower opens a run's event
// stream again when it ends, without any event, before the run has.
const maxReconnects = 5

var (
	// errStreamDone stops reading an event stream once the run's final
	// event has arrived.
	errStreamDone = errors.New("run ended")
	// errStreamEnded is why a follower gives up when the stream keeps
	// ending quietly before the run.
	errStreamEnded = errors.New("the event stream ended before the run did")
	// errBadEvent marks an event that does not decode: reconnecting would
	// not help.
	errBadEvent = errors.New("bad event")
)

// terminalRun reports whether a run in this status has ended.
func terminalRun(status string) bool {
	return status == runSuccess || status == runFailure || status == runCancelled
}

// runFollower prints the live progress of runs from their event streams:
// status changes as "JOB: STATUS" and log lines as "JOB | TEXT", with
// control characters escaped (see escapeControls). It may follow several
// runs at once; each line is written whole.
type runFollower struct {
	c              *client
	out            io.Writer
	sleep          func(ctx context.Context, d time.Duration) error
	reconnectDelay time.Duration
}

// followRuns follows every run in refs until each has ended, printing
// progress to progress, and returns each run's outcome (ID, Status,
// Error; the zero Run for one that could not be followed) and the joined
// errors. With more than one run, jobs are named WORKFLOW/JOB.
func (a *app) followRuns(ctx context.Context, c *client, refs []apiv1.RunRef, progress io.Writer) ([]apiv1.Run, error) {
	f := &runFollower{
		c:              c,
		out:            &lockedWriter{w: progress},
		sleep:          a.env.sleep,
		reconnectDelay: a.env.reconnectDelay,
	}
	results := make([]apiv1.Run, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		label := func(job string) string { return job }
		if len(refs) > 1 {
			label = func(job string) string { return ref.Workflow + "/" + job }
		}
		wg.Go(func() { results[i], errs[i] = f.follow(ctx, ref.ID, label) })
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// reportOutcome prints "run <id> <status>" for each followed run, with the
// run's error indented below it. It returns followErr if set, errSilent
// unless every run succeeded, and nil otherwise.
func reportOutcome(w io.Writer, runs []apiv1.Run, followErr error) error {
	ok := true
	for _, r := range runs {
		if r.ID == "" {
			ok = false
			continue
		}
		printLine(w, false, "run %s %s", r.ID, r.Status)
		if r.Error != "" {
			printLine(w, false, "  %s", r.Error)
		}
		if r.Status != runSuccess {
			ok = false
		}
	}
	switch {
	case followErr != nil:
		return followErr
	case !ok:
		return errSilent
	}
	return nil
}

// follow prints the progress of run id until it ends and returns its
// final state. A run that has already ended returns at once. When the
// stream ends early, the run is fetched: if it has ended meanwhile that is
// the answer, otherwise the stream is opened again.
func (f *runFollower) follow(ctx context.Context, id string, label func(string) string) (apiv1.Run, error) {
	run, err := f.c.getRun(ctx, id)
	if err != nil {
		return apiv1.Run{}, fmt.Errorf("watch run %q: %w", id, err)
	}
	if terminalRun(run.Status) {
		return run, nil
	}
	v := newRunView(run, label)
	quiet := 0
	for {
		final, progressed, err := f.stream(ctx, id, v)
		if final != nil {
			return *final, nil
		}
		if ctx.Err() != nil {
			return apiv1.Run{}, fmt.Errorf("watch run %q: %w", id, ctx.Err())
		}
		var ae *apiError
		if errors.As(err, &ae) || errors.Is(err, errBadEvent) {
			return apiv1.Run{}, fmt.Errorf("watch run %q: %w", id, err)
		}
		cur, gerr := f.c.getRun(ctx, id)
		if gerr == nil && terminalRun(cur.Status) {
			return cur, nil
		}
		if progressed {
			quiet = 0
		}
		quiet++
		if quiet > maxReconnects {
			cause := errors.Join(err, gerr)
			if cause == nil {
				cause = errStreamEnded
			}
			return apiv1.Run{}, fmt.Errorf("watch run %q: gave up after %d reconnects: %w", id, maxReconnects, cause)
		}
		if err := f.sleep(ctx, f.reconnectDelay); err != nil {
			return apiv1.Run{}, fmt.Errorf("watch run %q: %w", id, err)
		}
	}
}

// stream reads one connection of run id's event stream, printing each
// event, until the run's final event (returned as final) or the end of
// the stream. progressed says whether any event arrived.
func (f *runFollower) stream(ctx context.Context, id string, v *runView) (final *apiv1.Run, progressed bool, err error) {
	body, err := f.c.stream(ctx, runPath(id)+"/events")
	if err != nil {
		return nil, false, err
	}
	defer body.Close()
	err = readSSE(body, func(ev sseEvent) error {
		var e apiv1.Event
		if err := json.Unmarshal(ev.data, &e); err != nil {
			return fmt.Errorf("%w: decode %q event: %w", errBadEvent, ev.name, err)
		}
		progressed = true
		if e.Kind == "" {
			e.Kind = ev.name
		}
		if e.Kind == "run" && terminalRun(e.Status) {
			final = &apiv1.Run{ID: id, Status: e.Status, Error: e.Error}
			return errStreamDone
		}
		v.print(f.out, e)
		return nil
	})
	if final != nil {
		return final, true, nil
	}
	return nil, progressed, err
}

// runView turns a run's events into lines, knowing the step names from
// the run as it was when following began.
type runView struct {
	id    string
	label func(job string) string
	// steps maps a job's name and its id to its steps' names by index.
	steps map[string]map[int]string
}

func newRunView(run apiv1.Run, label func(string) string) *runView {
	v := &runView{id: run.ID, label: label, steps: map[string]map[int]string{}}
	for _, j := range run.Jobs {
		names := map[int]string{}
		for _, s := range j.Steps {
			names[s.Index] = s.Name
		}
		v.steps[j.Name] = names
		if j.ID != "" {
			v.steps[j.ID] = names
		}
	}
	return v
}

// print writes the lines of one event; kinds it does not know are
// skipped, so a newer server's extra events do no harm.
func (v *runView) print(w io.Writer, e apiv1.Event) {
	job := e.Job
	if job == "" {
		job = e.JobID
	}
	switch e.Kind {
	case "run":
		printLine(w, false, "run %s %s%s", v.id, e.Status, errSuffix(e.Error))
	case "job":
		printLine(w, false, "%s: %s%s", v.label(job), e.Status, errSuffix(e.Error))
	case "step":
		printLine(w, false, "%s: step %s %s%s", v.label(job), v.stepName(e), e.Status, errSuffix(e.Error))
	case "log":
		for _, l := range e.Lines {
			printLine(w, false, "%s | %s", v.label(job), strings.TrimRight(l.Text, "\r\n"))
		}
	}
}

// stepName is `INDEX "NAME"`, or the index alone when the name is unknown.
func (v *runView) stepName(e apiv1.Event) string {
	if e.Step == nil {
		return "?"
	}
	idx := strconv.Itoa(*e.Step)
	names := v.steps[e.Job]
	if names == nil {
		names = v.steps[e.JobID]
	}
	if name := names[*e.Step]; name != "" {
		return idx + " " + strconv.Quote(name)
	}
	return idx
}

func errSuffix(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

// lockedWriter serialises writes, so lines from runs followed at once do
// not mix.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
