package agent

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/protocol"
)

// jobReporter turns what the runner reports about one job into protocol
// messages in the job's outbox buffer. Output lines are batched into
// log.chunk messages: a chunk is queued once it holds flushLines lines,
// flushAfter after its first line, before a line of another step, before
// any status message, and when it would pass the chunk's text limit.
//
// It is safe for concurrent use: the runner's calls, the batch timer and
// the agent's own notes (note) take turns on mu, which also keeps the
// order of a job's messages the order of their seqs.
type jobReporter struct {
	box        *outbox
	buf        *jobBuffer
	jobID      string
	flushLines int
	flushAfter time.Duration

	mu        sync.Mutex
	step      int // the step of pending
	pending   []protocol.LogLine
	textBytes int
	timer     *time.Timer
	truncated map[int]bool // steps whose output reached the cap
}

var _ runner.Reporter = (*jobReporter)(nil)

func newJobReporter(box *outbox, buf *jobBuffer, jobID string, flushLines int, flushAfter time.Duration) *jobReporter {
	return &jobReporter{
		box: box, buf: buf, jobID: jobID,
		flushLines: flushLines, flushAfter: flushAfter,
		truncated: map[int]bool{},
	}
}

// JobRunning queues job.status running.
func (r *jobReporter) JobRunning() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked(false)
	r.box.append(r.buf, &protocol.JobStatus{JobID: r.jobID, Status: protocol.JobRunning}, false)
}

// StepStatus queues the step's pending output, then its step.status.
func (r *jobReporter) StepStatus(s runner.StepReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked(false)
	msg := &protocol.StepStatus{
		JobID:      r.jobID,
		Step:       s.Step,
		Status:     string(s.Status),
		StartedAt:  s.StartedAt,
		FinishedAt: s.FinishedAt,
	}
	if s.Status != runner.StatusRunning {
		msg.ExitCode = s.ExitCode
		msg.Error = errString(s.Err)
	}
	r.box.append(r.buf, msg, false)
}

// Log adds a line to the pending chunk.
func (r *jobReporter) Log(step int, l runner.Line) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(step, protocol.LogLine{TS: l.TS, Text: l.Text})
}

// LogTruncated queues the step's pending output as its last chunk, marked
// truncated.
func (r *jobReporter) LogTruncated(step int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.step != step {
		r.flushLocked(false)
		r.step = step
	}
	r.flushLocked(true)
	r.truncated[step] = true
}

// note queues a job-level line of the agent's own (a cancel's reason, a
// reconnect), unless the job has ended.
func (r *jobReporter) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(protocol.JobLevelStep, protocol.LogLine{TS: time.Now(), Text: "[kici] " + fmt.Sprintf(format, args...)})
}

// finish queues the pending output and the final job.status, the
// dispatch's last message.
func (r *jobReporter) finish(res runner.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked(false)
	m := &protocol.JobStatus{
		JobID:    r.jobID,
		Status:   string(res.Status),
		Error:    errString(res.Err),
		ExitCode: res.ExitCode,
	}
	if res.Status == runner.StatusFailure && errors.Is(res.Err, runner.ErrInfrastructure) {
		// Also after the job reported running: its image or services
		// are prepared after that.
		m.Cause = protocol.CauseInfrastructure
	}
	r.box.append(r.buf, m, true)
}

func (r *jobReporter) addLocked(step int, l protocol.LogLine) {
	if r.truncated[step] {
		return
	}
	if len(r.pending) > 0 && (step != r.step || r.textBytes+len(l.Text) > protocol.MaxLogChunkTextBytes) {
		r.flushLocked(false)
	}
	r.step = step
	r.pending = append(r.pending, l)
	r.textBytes += len(l.Text)
	switch {
	case len(r.pending) >= r.flushLines:
		r.flushLocked(false)
	case len(r.pending) == 1:
		r.timer = time.AfterFunc(r.flushAfter, r.flushTimer)
	}
}

func (r *jobReporter) flushTimer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked(false)
}

// flushLocked queues the pending lines as one chunk; with truncated the
// chunk is queued (even empty) and marked truncated.
func (r *jobReporter) flushLocked(truncated bool) {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	if len(r.pending) == 0 && !truncated {
		return
	}
	r.box.append(r.buf, &protocol.LogChunk{JobID: r.jobID, Step: r.step, Lines: r.pending, Truncated: truncated}, false)
	r.pending, r.textBytes = nil, 0
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
