package agent

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/protocol"
)

// chunks describes the queued messages as "log <step> x<lines>[ truncated]"
// or "<type>".
func chunks(msgs []protocol.JobScoped) []string {
	var out []string
	for _, m := range msgs {
		c, ok := m.(*protocol.LogChunk)
		if !ok {
			out = append(out, m.Type())
			continue
		}
		s := fmt.Sprintf("log %d x%d", c.Step, len(c.Lines))
		if c.Truncated {
			s += " truncated"
		}
		out = append(out, s)
	}
	return out
}

// TestReporterBatching runs the batching rules under a fake clock.
func TestReporterBatching(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", runner.MaxLineBytes)
	tests := []struct {
		name string
		// act drives the reporter; tick lets the fake clock run d.
		act  func(r *jobReporter, tick func(time.Duration))
		want []string
	}{
		{
			name: "a chunk goes 100ms after its first line",
			act: func(r *jobReporter, tick func(time.Duration)) {
				r.Log(0, line("a"))
				tick(60 * time.Millisecond)
				r.Log(0, line("b"))
				tick(39 * time.Millisecond)
			},
			want: nil,
		},
		{
			name: "and not later",
			act: func(r *jobReporter, tick func(time.Duration)) {
				r.Log(0, line("a"))
				tick(60 * time.Millisecond)
				r.Log(0, line("b"))
				tick(41 * time.Millisecond)
			},
			want: []string{"log 0 x2"},
		},
		{
			name: "50 lines make a chunk at once",
			act: func(r *jobReporter, tick func(time.Duration)) {
				for i := range 120 {
					r.Log(0, line(fmt.Sprint(i)))
				}
				tick(0)
			},
			want: []string{"log 0 x50", "log 0 x50"},
		},
		{
			name: "the rest follows on the timer",
			act: func(r *jobReporter, tick func(time.Duration)) {
				for i := range 120 {
					r.Log(0, line(fmt.Sprint(i)))
				}
				tick(time.Second)
			},
			want: []string{"log 0 x50", "log 0 x50", "log 0 x20"},
		},
		{
			name: "another step's line and any status flush first",
			act: func(r *jobReporter, tick func(time.Duration)) {
				r.Log(-1, line("checkout"))
				r.JobRunning()
				r.StepStatus(runner.StepReport{Step: 0, Status: runner.StatusRunning})
				r.Log(0, line("x"))
				r.Log(1, line("y"))
				r.StepStatus(runner.StepReport{Step: 1, Status: runner.StatusSuccess})
			},
			want: []string{"log -1 x1", "job.status", "step.status", "log 0 x1", "log 1 x1", "step.status"},
		},
		{
			name: "the text limit splits chunks",
			act: func(r *jobReporter, tick func(time.Duration)) {
				for range 3 {
					r.Log(0, line(big))
				}
				tick(time.Second)
			},
			want: []string{"log 0 x2", "log 0 x1"},
		},
		{
			name: "after the truncated chunk, nothing more of the step",
			act: func(r *jobReporter, tick func(time.Duration)) {
				r.Log(0, line("a"))
				r.Log(0, line("[kici] log limit"))
				r.LogTruncated(0)
				r.Log(0, line("late"))
				r.note("a note")
				r.finish(runner.Result{Status: runner.StatusSuccess})
				tick(time.Second)
			},
			want: []string{"log 0 x2 truncated", "log -1 x1", "job.status"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				box := newOutbox(slog.New(slog.DiscardHandler), 1<<30)
				buf := box.open("j")
				r := newJobReporter(box, buf, "j", DefaultLogFlushLines, DefaultLogFlushInterval)
				tc.act(r, func(d time.Duration) {
					time.Sleep(d)
					synctest.Wait()
				})
				if diff := cmp.Diff(tc.want, chunks(box.takeUnsent())); diff != "" {
					t.Errorf("queued (-want +got):\n%s", diff)
				}
				r.finish(runner.Result{Status: runner.StatusSuccess}) // stops the timer
			})
		})
	}
}

func line(text string) runner.Line { return runner.Line{TS: time.Now(), Text: text} }

// TestReporterMarksInfrastructureFailures: a failure whose error matches
// runner.ErrInfrastructure (no Docker engine, an image not pulled) is
// reported with that cause, whether or not the job reported running;
// other ends leave the cause to the orchestrator.
func TestReporterMarksInfrastructureFailures(t *testing.T) {
	t.Parallel()
	infra := fmt.Errorf("prepare containers: %w", runner.ErrInfrastructure)
	tests := []struct {
		name string
		res  runner.Result
		want string
	}{
		{name: "infrastructure failure", res: runner.Result{Status: runner.StatusFailure, Err: infra}, want: protocol.CauseInfrastructure},
		{name: "step failure", res: runner.Result{Status: runner.StatusFailure, Err: fmt.Errorf("step %q: exited with code 1", "x")}},
		{name: "success", res: runner.Result{Status: runner.StatusSuccess}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			box := newOutbox(slog.New(slog.DiscardHandler), 1<<30)
			r := newJobReporter(box, box.open("j"), "j", DefaultLogFlushLines, DefaultLogFlushInterval)
			r.finish(tc.res)
			msgs := box.takeUnsent()
			st, ok := msgs[len(msgs)-1].(*protocol.JobStatus)
			if !ok {
				t.Fatalf("last message: got %T, want *protocol.JobStatus", msgs[len(msgs)-1])
			}
			if st.Cause != tc.want {
				t.Errorf("cause: got %q, want %q", st.Cause, tc.want)
			}
		})
	}
}
