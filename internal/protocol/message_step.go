package protocol

import "time"

// Step statuses an agent reports in a [StepStatus]. Running is the only one
// that is not final.
const (
	StepRunning   = "running"
	StepSuccess   = "success"
	StepFailure   = "failure"
	StepSkipped   = "skipped"
	StepCancelled = "cancelled"
)

// StepStatus reports one step's status (agent → orchestrator): StepRunning
// when its process starts, then one final status. A skipped step gets only
// the final StepSkipped. Steps after a failed one (without continue-on-error)
// are reported StepSkipped.
type StepStatus struct {
	Burst
	// JobID is the job; required.
	JobID string `json:"job_id"`
	// Seq is the message's sequence number within the dispatch; at least 1.
	Seq uint64 `json:"seq"`
	// Step is the step's 0-based index in JobDispatch.Job.Steps.
	Step int `json:"step"`
	// Status is one of the Step* statuses; required.
	Status string `json:"status"`
	// ExitCode is the step process's exit code, in a final status.
	ExitCode int `json:"exit_code,omitempty"`
	// Error says why the step failed or was cancelled (e.g. "step timeout
	// 5m0s exceeded").
	Error string `json:"error,omitempty"`
	// StartedAt is when the step's process started; zero for a skipped step.
	StartedAt time.Time `json:"started_at,omitzero"`
	// FinishedAt is when the step ended, in a final status; not before
	// StartedAt.
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Type returns [TypeStepStatus].
func (*StepStatus) Type() string { return TypeStepStatus }

// JobSeq returns JobID and Seq.
func (m *StepStatus) JobSeq() (string, uint64) { return m.JobID, m.Seq }

// Validate checks the job id, seq, step index, status and times.
func (m *StepStatus) Validate() error {
	c := check{typ: TypeStepStatus}
	c.required("job_id", m.JobID)
	c.seq("seq", m.Seq)
	c.atLeast("step", int64(m.Step), 0)
	c.oneOf("status", m.Status, StepRunning, StepSuccess, StepFailure, StepSkipped, StepCancelled)
	c.notBefore("finished_at", m.FinishedAt, "started_at", m.StartedAt)
	return c.err
}

// JobLevelStep is the LogChunk.Step of output that belongs to no step: the
// checkout and the agent's own notes about the job (e.g. a replay gap).
const JobLevelStep = -1

// Limits of one [LogChunk], enforced by its Validate. The agent batches lines
// within them (and cuts a longer line into pieces). Even if every byte of
// text needed a six-byte JSON escape, a chunk stays well under
// [MaxMessageBytes].
const (
	// MaxLogChunkLines bounds the lines of one chunk.
	MaxLogChunkLines = 1000
	// MaxLogChunkTextBytes bounds the summed Text bytes of one chunk.
	MaxLogChunkTextBytes = 128 << 10
)

// LogChunk carries a batch of output lines of one step, in order (agent →
// orchestrator).
type LogChunk struct {
	Burst
	// JobID is the job; required.
	JobID string `json:"job_id"`
	// Seq is the message's sequence number within the dispatch; at least 1.
	Seq uint64 `json:"seq"`
	// Step is the step's 0-based index, or JobLevelStep.
	Step int `json:"step"`
	// Lines are the output lines, oldest first. Empty only when Truncated.
	Lines []LogLine `json:"lines,omitempty"`
	// Truncated means the step's output reached the agent's size cap: the
	// agent drops every later line of the step and sends no further chunk
	// for it.
	Truncated bool `json:"truncated,omitempty"`
}

// LogLine is one line of output.
type LogLine struct {
	// TS is when the agent read the line; required. On the wire it is an
	// RFC 3339 timestamp with nanoseconds.
	TS time.Time `json:"ts"`
	// Text is the line without its line ending, secrets already masked.
	Text string `json:"text"`
}

// Type returns [TypeLogChunk].
func (*LogChunk) Type() string { return TypeLogChunk }

// JobSeq returns JobID and Seq.
func (m *LogChunk) JobSeq() (string, uint64) { return m.JobID, m.Seq }

// Validate checks the job id, seq, step index, and the lines against the
// chunk limits.
func (m *LogChunk) Validate() error {
	c := check{typ: TypeLogChunk}
	c.required("job_id", m.JobID)
	c.seq("seq", m.Seq)
	c.atLeast("step", int64(m.Step), JobLevelStep)
	switch {
	case len(m.Lines) == 0 && !m.Truncated:
		c.failf("missing %q", "lines")
	case len(m.Lines) > MaxLogChunkLines:
		c.failf("%q has %d lines, limit %d", "lines", len(m.Lines), MaxLogChunkLines)
	}
	text := 0
	for i, l := range m.Lines {
		if l.TS.IsZero() {
			c.failf("missing %q", item("lines", i, "ts"))
		}
		text += len(l.Text)
	}
	if text > MaxLogChunkTextBytes {
		c.failf("%q hold %d bytes of text, limit %d", "lines", text, MaxLogChunkTextBytes)
	}
	return c.err
}
