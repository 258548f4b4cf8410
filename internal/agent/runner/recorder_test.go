package runner_test

import (
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/agent/runner"
)

// recorder is a Reporter that keeps everything it is told.
type recorder struct {
	mu        sync.Mutex
	running   bool
	steps     []runner.StepReport
	lines     map[int][]string
	truncated map[int]bool
	changed   chan struct{} // closed and replaced on every call
}

func newRecorder() *recorder {
	return &recorder{lines: map[int][]string{}, truncated: map[int]bool{}, changed: make(chan struct{})}
}

func (r *recorder) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) JobRunning() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = true
	r.notify()
}

func (r *recorder) StepStatus(s runner.StepReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
	r.notify()
}

func (r *recorder) Log(step int, l runner.Line) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.TS.IsZero() {
		panic("line without a timestamp")
	}
	r.lines[step] = append(r.lines[step], l.Text)
	r.notify()
}

func (r *recorder) LogTruncated(step int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.truncated[step] = true
	r.notify()
}

// waitLine blocks until step has printed text.
func (r *recorder) waitLine(t *testing.T, step int, text string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		found := false
		for _, l := range r.lines[step] {
			found = found || l == text
		}
		ch := r.changed
		r.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("step %d: got no line %q within 10s", step, text)
		}
	}
}

// finals returns each step's final status, by index.
func (r *recorder) finals() []runner.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runner.Status
	for _, s := range r.steps {
		if s.Status == runner.StatusRunning {
			continue
		}
		for len(out) <= s.Step {
			out = append(out, "")
		}
		out[s.Step] = s.Status
	}
	return out
}

func (r *recorder) final(step int) runner.StepReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.steps {
		if s.Step == step && s.Status != runner.StatusRunning {
			return s
		}
	}
	return runner.StepReport{}
}
