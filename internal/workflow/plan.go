package workflow

// SchemaVersion is the version of the JSON plan this package writes and
// accepts. A committed .kici/kici.lock.json of any other version is refused
// with a message that names both versions and how to regenerate the file.
// Bump it whenever a field of Plan (or of anything below it) changes meaning.
const SchemaVersion = 1

// LockPath is the repository-relative path of a committed, compiled plan.
const LockPath = ".kici/kici.lock.json"

// WorkflowsDir is the repository-relative directory that holds workflow files.
const WorkflowsDir = ".kici/workflows"

// Plan is the compiled form of every workflow of a repository: what
// `kici compile` prints, what may be committed as .kici/kici.lock.json, and
// what the orchestrator schedules. It is plain data, safe to share between
// goroutines once built.
type Plan struct {
	SchemaVersion int        `json:"schemaVersion"`
	Workflows     []Workflow `json:"workflows"`
}

// Workflow is one compiled workflow file.
type Workflow struct {
	// Name is unique within a repository; it defaults to the file's base name.
	Name string `json:"name"`
	// File is the repository-relative path of the YAML source.
	File string `json:"file"`
	// ContentHash is the hex SHA-256 of "<SchemaVersion>:" followed by the
	// source with CRLF normalised to LF. It identifies the source a plan was
	// compiled from.
	ContentHash string `json:"contentHash"`
	// Triggers are tried in order; the first that matches an event wins.
	// A workflow with no triggers never runs on an event.
	Triggers []Trigger `json:"triggers"`
	// Env is the workflow-level environment, already interpolated.
	Env map[string]string `json:"env,omitempty"`
	// Concurrency, when set, puts each run of the workflow in a group of
	// which one run goes on at a time.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	// Jobs are in file order, with matrix jobs expanded in place.
	Jobs []Job `json:"jobs"`
}

// Trigger kinds, as written under `on:` and reported by the matcher.
const (
	TriggerPush        = "push"
	TriggerTag         = "tag"
	TriggerPullRequest = "pull_request"
	TriggerManual      = "manual"
	TriggerSchedule    = "schedule"
)

// Trigger is one entry of a workflow's `on:` map. Only the fields of its
// Type are set. Pattern lists are doublestar globs; an empty list means
// "any". In Paths, a pattern that starts with "!" excludes.
type Trigger struct {
	Type           string   `json:"type"`
	Branches       []string `json:"branches,omitempty"`
	BranchesIgnore []string `json:"branchesIgnore,omitempty"`
	Paths          []string `json:"paths,omitempty"`
	Tags           []string `json:"tags,omitempty"`
	// Types are pull-request actions (opened, synchronize, ...).
	Types []string `json:"types,omitempty"`
	// Inputs are the typed inputs of a manual trigger.
	Inputs []Input `json:"inputs,omitempty"`
	// Cron is a five-field cron spec (schedule triggers), evaluated in UTC.
	Cron string `json:"cron,omitempty"`
}

// Input types of a manual trigger.
const (
	InputString  = "string"
	InputBoolean = "boolean"
	InputNumber  = "number"
	InputChoice  = "choice"
)

// Input is a typed input of a manual trigger. Default is already checked
// against Type (and Options for a choice).
type Input struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Description string   `json:"description,omitempty"`
	Required    bool     `json:"required,omitempty"`
	Default     string   `json:"default,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// Job statuses a `needs` condition can wait for. They are the terminal job
// statuses of the contract.
const (
	NeedSuccess   = "success"
	NeedFailure   = "failure"
	NeedCancelled = "cancelled"
	NeedSkipped   = "skipped"
)

// Needs conditions as written in a workflow's `needs:` map.
const (
	WhenSuccess = "success" // the upstream succeeded
	WhenFailure = "failure" // the upstream failed
	WhenAlways  = "always"  // the upstream ended, whatever its status
	WhenSkipped = "skipped" // the upstream succeeded or was skipped
)

// Job is one runnable job. A matrix job is expanded into one Job per
// combination, named "base (k=v, k2=v2)" with the dimensions in name order.
type Job struct {
	// Name is unique within the workflow (the expanded name for matrix jobs).
	Name string `json:"name"`
	// Base is the job's key in the YAML file; equal to Name without a matrix.
	Base string `json:"base"`
	// Matrix holds this combination's values; nil without a matrix.
	Matrix map[string]string `json:"matrix,omitempty"`
	// RunsOn lists labels an agent must all carry. Empty means any agent.
	RunsOn []string `json:"runsOn"`
	// Needs are the upstream jobs, by expanded name, each with the set of
	// upstream statuses under which this job may run.
	Needs []Need `json:"needs,omitempty"`
	// If is an expression evaluated when the job becomes ready; false makes
	// the job skipped. Empty means "run".
	If string `json:"if,omitempty"`
	// Env is the job's environment: workflow env overlaid with the job's own.
	Env map[string]string `json:"env,omitempty"`
	// TimeoutMS bounds the whole job in milliseconds; 0 means the default.
	TimeoutMS int64 `json:"timeoutMs,omitempty"`
	// ContinueOnError makes a failure of this job count as success for the
	// run's status and for its dependants.
	ContinueOnError bool `json:"continueOnError,omitempty"`
	// Secrets names the secrets the job receives as environment variables.
	Secrets []string `json:"secrets,omitempty"`
	// Concurrency, when set, puts the job in a group of which one job
	// runs at a time.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	// Retry is the job's retry policy; nil means DefaultRetry (see
	// EffectiveRetry).
	Retry *Retry `json:"retry,omitempty"`
	// Environment names the deployment environment the job runs in: its
	// secrets come from the environment's scope, and the environment may
	// require an approval before the job starts.
	Environment string `json:"environment,omitempty"`
	// Image, when set, is the container the steps run in (on an agent with
	// Docker), the workspace mounted.
	Image *Container `json:"image,omitempty"`
	// Services are sidecar containers started before the steps.
	Services []Service `json:"services,omitempty"`
	// Cache lists the paths restored before the steps and saved after.
	Cache []Cache `json:"cache,omitempty"`
	// Artifacts are the files uploaded after the steps, kept with the
	// run, and restored into the workspace of the jobs that need this one.
	Artifacts *Artifacts `json:"artifacts,omitempty"`
	// FailFast (a matrix job) cancels the combinations of the same base
	// job still queued or running when one fails; MaxParallel (when not
	// 0) bounds how many of them run at once.
	FailFast    bool   `json:"failFast,omitempty"`
	MaxParallel int    `json:"maxParallel,omitempty"`
	Steps       []Step `json:"steps"`
}

// Need is one upstream of a job.
type Need struct {
	Job string `json:"job"`
	// On is the set of upstream statuses (NeedSuccess, ...) that allow this
	// job to run; any other terminal status skips it.
	On []string `json:"on"`
}

// Step is one shell command of a job.
type Step struct {
	// Name defaults to "step-N" (1-based) when the file gives none.
	Name string `json:"name"`
	// Run is the script. References to the event and inputs have been
	// rewritten to environment variables (see docs/workflows.md), so event
	// data can never inject shell code.
	Run string `json:"run"`
	// Shell is the interpreter command line; the script path is appended.
	// Empty means `bash -eo pipefail` (or `sh -e` where bash is missing).
	Shell            string            `json:"shell,omitempty"`
	WorkingDirectory string            `json:"workingDirectory,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	// TimeoutMS bounds the step in milliseconds; 0 means no step timeout.
	TimeoutMS       int64  `json:"timeoutMs,omitempty"`
	If              string `json:"if,omitempty"`
	ContinueOnError bool   `json:"continueOnError,omitempty"`
}
