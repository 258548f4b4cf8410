package store

// The status vocabularies below are the contract's (docs: CONTRACT.md,
// "Statuses"). The database refuses any other value with a CHECK
// constraint. Which transitions are legal is not decided here: the caller's
// state machine passes the allowed from-states to each guarded update, and
// the store applies the update only if the row is in one of them.

// RunStatus is the status of a run.
type RunStatus string

// Run statuses. A run held for approval (a pull request from a fork, under
// the source's "approve" policy) is RunAwaitingApproval, before pending:
// its jobs wait and nothing is queued until it is approved.
const (
	RunAwaitingApproval RunStatus = "awaiting_approval"
	RunPending          RunStatus = "pending"
	RunRunning          RunStatus = "running"
	RunSuccess          RunStatus = "success"
	RunFailure          RunStatus = "failure"
	RunCancelled        RunStatus = "cancelled"
)

// JobStatus is the status of a job.
type JobStatus string

// Job statuses.
const (
	JobWaiting    JobStatus = "waiting"
	JobQueued     JobStatus = "queued"
	JobDispatched JobStatus = "dispatched"
	JobRunning    JobStatus = "running"
	JobSuccess    JobStatus = "success"
	JobFailure    JobStatus = "failure"
	JobCancelled  JobStatus = "cancelled"
	JobSkipped    JobStatus = "skipped"
)

// StepStatus is the status of a step.
type StepStatus string

// Step statuses.
const (
	StepPending   StepStatus = "pending"
	StepRunning   StepStatus = "running"
	StepSuccess   StepStatus = "success"
	StepFailure   StepStatus = "failure"
	StepSkipped   StepStatus = "skipped"
	StepCancelled StepStatus = "cancelled"
)

// QueueStatus is the status of a dispatch queue row.
type QueueStatus string

// Queue statuses. A pending row waits for an agent; a dispatched row has been
// claimed by one. A row leaves the queue (Dequeue) when its job ends.
const (
	QueuePending    QueueStatus = "pending"
	QueueDispatched QueueStatus = "dispatched"
)

// SourceKind is where a source's workflows and code come from.
type SourceKind string

// Source kinds.
const (
	SourceLocal  SourceKind = "local"
	SourceGit    SourceKind = "git"
	SourceGitHub SourceKind = "github"
)

// ForkPolicy is what a pull request from a fork does on a source.
type ForkPolicy string

// Fork policies. The zero value reads as ForkApprove (see Source).
const (
	// ForkApprove creates the run awaiting approval; once approved it runs
	// with the source's secrets.
	ForkApprove ForkPolicy = "approve"
	// ForkRun starts the run at once, without secrets.
	ForkRun ForkPolicy = "run"
	// ForkIgnore starts nothing.
	ForkIgnore ForkPolicy = "ignore"
)

// ForkPolicies lists the fork policies, the default first.
var ForkPolicies = []ForkPolicy{ForkApprove, ForkRun, ForkIgnore}
