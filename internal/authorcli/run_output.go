package authorcli

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
)

// jobPrinter is the runner.Reporter of one job of `kici run`: it prints
// every output line and step status as a line "[JOB] text". The runner
// already masked the secrets in lines and errors.
type jobPrinter struct {
	w     io.Writer
	job   string
	steps []workflow.Step
	// quiet is a job-level line not to print: the runner's note of the
	// directory, which the run's header already gave.
	quiet string
}

var _ runner.Reporter = (*jobPrinter)(nil)

func (p *jobPrinter) printf(format string, args ...any) {
	fmt.Fprintf(p.w, "[%s] %s\n", p.job, fmt.Sprintf(format, args...))
}

// JobRunning prints nothing: the first step's start follows.
func (p *jobPrinter) JobRunning() {}

// Log prints one output line.
func (p *jobPrinter) Log(step int, l runner.Line) {
	if step == runner.JobLevelStep && l.Text == p.quiet {
		return
	}
	p.printf("%s", l.Text)
}

// LogTruncated prints nothing: the runner logged a marker line already.
func (p *jobPrinter) LogTruncated(int) {}

// StepStatus prints a step's start and end:
//
//	▶ name                     started
//	✓ name (1.2s)              succeeded
//	✗ name (0.3s, exit 3)      failed (", continue-on-error" when allowed to)
//	✗ name (4.0s, exit 143): cancelled: interrupted
//	○ name (skipped)
func (p *jobPrinter) StepStatus(r runner.StepReport) {
	switch r.Status {
	case runner.StatusRunning:
		p.printf("▶ %s", r.Name)
	case runner.StatusSuccess:
		p.printf("✓ %s (%s)", r.Name, formatDuration(r.FinishedAt.Sub(r.StartedAt)))
	case runner.StatusSkipped:
		p.printf("○ %s (skipped)", r.Name)
	default:
		p.printf("✗ %s%s", r.Name, p.failure(r))
	}
}

// failure describes how a step failed or was cancelled.
func (p *jobPrinter) failure(r runner.StepReport) string {
	var parts []string
	if !r.StartedAt.IsZero() {
		parts = append(parts, formatDuration(r.FinishedAt.Sub(r.StartedAt)))
	}
	if r.ExitCode > 0 {
		parts = append(parts, fmt.Sprintf("exit %d", r.ExitCode))
	}
	if r.Status == runner.StatusFailure && r.Step >= 0 && r.Step < len(p.steps) && p.steps[r.Step].ContinueOnError {
		parts = append(parts, "continue-on-error")
	}
	s := ""
	if len(parts) > 0 {
		s = " (" + strings.Join(parts, ", ") + ")"
	}
	// A plain non-zero exit says no more than "exit N" above; a timeout, a
	// cancel, a failed start or an `if` that failed to evaluate does.
	if msg := errText(r.Err); msg != "" && msg != fmt.Sprintf("exited with code %d", r.ExitCode) {
		s += ": " + msg
	}
	return s
}

// printHeader says what is about to run, for which event, and where.
func (lr *localRun) printHeader() {
	ev, wf := lr.cfg.Event, lr.cfg.Workflow
	desc := ev.Kind
	if ev.Ref != "" {
		desc += " " + ev.Ref
	}
	if ev.Kind == trigger.KindPullRequest {
		desc += fmt.Sprintf(" %s into %s", quoteIfEmpty(ev.HeadBranch), ev.BaseBranch)
	}
	if ev.Action != "" {
		desc += " (" + ev.Action + ")"
	}
	w := lr.cfg.Stdout
	fmt.Fprintf(w, "workflow %s (%s): %d job(s), one at a time\n", wf.Name, wf.File, len(lr.jobs))
	fmt.Fprintf(w, "event: %s\n", desc)
	if len(lr.cfg.Inputs) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(lr.cfg.Inputs)) {
			kv = append(kv, k+"="+lr.cfg.Inputs[k])
		}
		fmt.Fprintf(w, "inputs: %s\n", strings.Join(kv, " "))
	}
	fmt.Fprintf(w, "steps run in: %s\n\n", lr.cfg.Dir)
}

func quoteIfEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// printSummary prints one row per selected job and the run's verdict:
//
//	JOB     STATUS   TIME  NOTE
//	build   success  1.2s
//	deploy  skipped  -     needs not met: build (failure)
//
//	run failed: 1 succeeded, 1 skipped
func (lr *localRun) printSummary() {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tTIME\tNOTE")
	counts := map[string]int{}
	for _, lj := range lr.jobs {
		t := "-"
		if lj.ran {
			t = formatDuration(lj.dur)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", lj.job.Name, lj.status, t, lj.note)
		key := lj.status
		if lj.status == string(runner.StatusFailure) && !lj.failed() {
			key = "coe"
		}
		counts[key]++
	}
	_ = tw.Flush()
	w := lr.cfg.Stdout
	fmt.Fprintln(w)
	for line := range strings.Lines(buf.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	var parts []string
	for _, c := range []struct{ key, word string }{
		{string(runner.StatusSuccess), "succeeded"},
		{"coe", "failed under continue-on-error"},
		{string(runner.StatusFailure), "failed"},
		{string(runner.StatusCancelled), "cancelled"},
		{string(runner.StatusSkipped), "skipped"},
		{statusNotRun, "not run"},
	} {
		if n := counts[c.key]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c.word))
		}
	}
	verdict := "run succeeded"
	if !lr.succeeded() {
		verdict = "run failed"
	}
	if len(parts) == 0 {
		parts = append(parts, "no jobs")
	}
	fmt.Fprintf(w, "\n%s: %s\n", verdict, strings.Join(parts, ", "))
}

// formatDuration writes d as "1.2s" under a minute and "2m5s" above.
func formatDuration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
