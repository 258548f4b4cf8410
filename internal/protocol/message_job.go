package protocol

// Reasons an agent gives in a [JobReject].
const (
	// RejectBusy: every one of the agent's slots is taken.
	RejectBusy = "busy"
	// RejectLabels: the job's runs-on labels are not all among the agent's.
	RejectLabels = "labels"
	// RejectShuttingDown: the agent is draining and takes no new job.
	RejectShuttingDown = "shutting_down"
)

// Job statuses an agent reports in a [JobStatus]. Running is the only one
// that is not final; after a final status the agent sends nothing more for
// the job.
const (
	JobRunning   = "running"
	JobSuccess   = "success"
	JobFailure   = "failure"
	JobCancelled = "cancelled"
)

// JobAck accepts a [JobDispatch] (agent → orchestrator), before any work
// starts. It is the job's first message, seq 1.
type JobAck struct {
	Burst
	// JobID is the dispatched job; required.
	JobID string `json:"job_id"`
	// Seq is the message's sequence number within the dispatch; at least 1.
	Seq uint64 `json:"seq"`
}

// Type returns [TypeJobAck].
func (*JobAck) Type() string { return TypeJobAck }

// JobSeq returns JobID and Seq.
func (m *JobAck) JobSeq() (string, uint64) { return m.JobID, m.Seq }

// Validate checks the job id and seq.
func (m *JobAck) Validate() error {
	c := check{typ: TypeJobAck}
	c.required("job_id", m.JobID)
	c.seq("seq", m.Seq)
	return c.err
}

// JobReject refuses a [JobDispatch] (agent → orchestrator) instead of a
// [JobAck]; it is the job's first and last message of that dispatch. The
// orchestrator puts the job back in the queue, counting the attempt.
type JobReject struct {
	Burst
	// JobID is the dispatched job; required.
	JobID string `json:"job_id"`
	// Seq is the message's sequence number within the dispatch; at least 1.
	Seq uint64 `json:"seq"`
	// Reason is RejectBusy, RejectLabels or RejectShuttingDown; required.
	Reason string `json:"reason"`
}

// Type returns [TypeJobReject].
func (*JobReject) Type() string { return TypeJobReject }

// JobSeq returns JobID and Seq.
func (m *JobReject) JobSeq() (string, uint64) { return m.JobID, m.Seq }

// Validate checks the job id, seq and reason.
func (m *JobReject) Validate() error {
	c := check{typ: TypeJobReject}
	c.required("job_id", m.JobID)
	c.seq("seq", m.Seq)
	c.oneOf("reason", m.Reason, RejectBusy, RejectLabels, RejectShuttingDown)
	return c.err
}

// JobStatus reports a job's status (agent → orchestrator): JobRunning once
// the agent starts work (after the checkout), then one final status after
// the last step's [StepStatus] and [LogChunk].
type JobStatus struct {
	Burst
	// JobID is the job; required.
	JobID string `json:"job_id"`
	// Seq is the message's sequence number within the dispatch; at least 1.
	Seq uint64 `json:"seq"`
	// Status is one of the Job* statuses; required.
	Status string `json:"status"`
	// Error says why the job failed or was cancelled (e.g. "step \"test\"
	// exited with code 2", "job timeout 10m0s exceeded", "checkout: ...").
	Error string `json:"error,omitempty"`
	// ExitCode is the exit code of the step that failed the job, if any.
	ExitCode int `json:"exit_code,omitempty"`
	// Cause, on a failure, says why the job failed when the agent knows:
	// one of the Cause* values. Empty leaves it to the orchestrator, which
	// counts a failure before the job reported running as infrastructure.
	// The orchestrator retries a job by its cause (the workflow's retry:).
	Cause string `json:"cause,omitempty"`
}

// Causes of a failed job ([JobStatus.Cause]), named as the workflow's
// retry.when names them.
const (
	// CauseInfrastructure: the job could not start its steps for a reason
	// outside them (its code not fetched, its image not pulled).
	CauseInfrastructure = "infrastructure"
	// CauseTimeout: the job, or one of its steps, ran out of time.
	CauseTimeout = "timeout"
	// CauseFailure: a step failed.
	CauseFailure = "failure"
)

// Type returns [TypeJobStatus].
func (*JobStatus) Type() string { return TypeJobStatus }

// JobSeq returns JobID and Seq.
func (m *JobStatus) JobSeq() (string, uint64) { return m.JobID, m.Seq }

// Validate checks the job id, seq and status.
func (m *JobStatus) Validate() error {
	c := check{typ: TypeJobStatus}
	c.required("job_id", m.JobID)
	c.seq("seq", m.Seq)
	c.oneOf("status", m.Status, JobRunning, JobSuccess, JobFailure, JobCancelled)
	if m.Cause != "" {
		c.oneOf("cause", m.Cause, CauseInfrastructure, CauseTimeout, CauseFailure)
	}
	return c.err
}
