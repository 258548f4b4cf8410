// Package apiv1 holds the JSON shapes of kici's HTTP API version 1
// (/api/v1/...): what the orchestrator's api package writes and what
// kici-admin reads. It holds types only, no behaviour, so both sides can
// import it; CONTRACT.md is the authority for every field named there.
package apiv1

import (
	"encoding/json"
	"time"
)

// Error is the body of every non-2xx response.
type Error struct {
	// Error is one line saying what was wrong.
	Error string `json:"error"`
	// Details lists individual problems (e.g. every workflow error).
	Details []string `json:"details,omitempty"`
}

// Source is a registered repository.
type Source struct {
	Name string `json:"name"`
	// Kind is local, git or github.
	Kind string `json:"kind"`
	// Path (local), URL (git) or Repo (github, owner/name).
	Path string `json:"path,omitempty"`
	URL  string `json:"url,omitempty"`
	Repo string `json:"repo,omitempty"`
	// WebhookSecret is accepted on create and never returned.
	WebhookSecret string `json:"webhook_secret,omitempty"`
	// ForkPullRequests is what a pull request from a fork does: approve
	// (the default when empty on create: the run awaits approval), run
	// (it starts at once without secrets) or ignore (nothing starts).
	// Always set in answers.
	ForkPullRequests string `json:"fork_pull_requests,omitempty"`
	// GitHubRepo (OWNER/NAME) ties a local or git source to the GitHub
	// repository it mirrors: its runs are reported there as check runs.
	// A github source reports to Repo and leaves it empty.
	GitHubRepo string    `json:"github_repo,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// SourceList is GET /api/v1/sources.
type SourceList struct {
	Sources []Source `json:"sources"`
}

// TriggerRequest is POST /api/v1/sources/{name}/trigger.
type TriggerRequest struct {
	// Event is push, tag or manual.
	Event string `json:"event"`
	// Ref is a branch, tag or full ref; empty means the default branch.
	Ref string `json:"ref,omitempty"`
	// SHA pins the commit; empty resolves Ref.
	SHA string `json:"sha,omitempty"`
	// Inputs are a manual run's inputs.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Workflows, when not empty, limits the trigger to the workflows of
	// these names; a name the commit has no workflow of is an error (422)
	// that lists the names there.
	Workflows []string `json:"workflows,omitempty"`
	// ChangedFiles are a push's changed files (repository-relative paths),
	// so that `paths:` filters apply; empty means unknown. Push events only.
	ChangedFiles []string `json:"changed_files,omitempty"`
}

// RunRef names one run a trigger started.
type RunRef struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
}

// TriggerResponse is the answer to a trigger: the runs started (possibly
// none) and, per workflow, why it did or did not match.
type TriggerResponse struct {
	Runs      []RunRef   `json:"runs"`
	Decisions []Decision `json:"decisions,omitempty"`
	// Problems are the invalid workflow files of the commit, one
	// FILE:LINE:COL: message each, when others were valid and ran.
	Problems []string `json:"problems,omitempty"`
}

// Decision is the matcher's verdict on one workflow.
type Decision struct {
	Workflow string `json:"workflow"`
	Matched  bool   `json:"matched"`
	Reason   string `json:"reason"`
}

// Run is GET /api/v1/runs/{id}, and an element of RunList.
type Run struct {
	ID       string          `json:"id"`
	Source   string          `json:"source"`
	Workflow string          `json:"workflow"`
	Event    json.RawMessage `json:"event"`
	// Actor is who caused the run's event: the admin token's name for a
	// run started through the API or kici-admin, the provider's user for a
	// webhook delivery; empty when unknown.
	Actor      string     `json:"actor,omitempty"`
	Ref        string     `json:"ref"`
	SHA        string     `json:"sha"`
	Status     string     `json:"status"`
	Error      string     `json:"error"`
	ParentRun  string     `json:"parent_run_id,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Jobs       []Job      `json:"jobs,omitempty"`
}

// Job is one job of a Run.
type Job struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Status     string     `json:"status"`
	RunsOn     []string   `json:"runs_on"`
	AgentID    string     `json:"agent_id"`
	Error      string     `json:"error"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Attempt is the job's attempt, from 1: one more than the times it
	// was retried (the workflow's retry:). Its status, times, agent and
	// steps are the attempt's.
	Attempt int `json:"attempt"`
	// QueuedAt is when the job last entered the queue (for its current
	// attempt); nil if it never did (it waits for its needs, or was
	// skipped).
	QueuedAt *time.Time `json:"queued_at"`
	// PreviousAttempts are the attempts before the current one, oldest
	// first: each ended for a cause the job's retry: names and was
	// retried. Only GET /api/v1/runs/{id} fills it.
	PreviousAttempts []JobAttempt `json:"previous_attempts,omitempty"`
	Steps            []Step       `json:"steps"`
	// Needs are the names of the jobs of the run this one waits for.
	Needs []string `json:"needs,omitempty"`
}

// JobAttempt is an earlier attempt of a Job, which ended and was retried.
type JobAttempt struct {
	Attempt int `json:"attempt"`
	// Cause is why it ended: agent-lost, infrastructure, timeout or
	// failure (as the workflow's retry.when names them).
	Cause string `json:"cause"`
	// Error is the error the job would have ended with.
	Error     string     `json:"error"`
	AgentID   string     `json:"agent_id,omitempty"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   time.Time  `json:"ended_at"`
}

// Step is one step of a Job (of its current attempt).
type Step struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Error    string `json:"error,omitempty"`
	// StartedAt and FinishedAt are when the step started and ended; nil
	// until it did (a skipped step never starts).
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// RerunRequest is the optional body of POST /api/v1/runs/{id}/rerun.
type RerunRequest struct {
	// Failed reruns only the jobs of the run that did not succeed (failed
	// or cancelled) and the jobs downstream of them; the others are copied
	// into the new run with their outcome. The run must have ended, and
	// not every job of it succeeded.
	Failed bool `json:"failed,omitempty"`
}

// RunList is GET /api/v1/runs.
type RunList struct {
	Runs []Run `json:"runs"`
}

// Run statuses a client may see, in the order a run goes through them. A
// run awaiting approval (a pull request from a fork) waits for
// POST /api/v1/runs/{id}/approve before any job is queued.
const (
	RunAwaitingApproval = "awaiting_approval"
	RunPending          = "pending"
	RunRunning          = "running"
	RunSuccess          = "success"
	RunFailure          = "failure"
	RunCancelled        = "cancelled"
)

// CancelRequest is POST /api/v1/runs/{id}/cancel.
type CancelRequest struct {
	// Force kills steps at once instead of after the grace period.
	Force bool `json:"force"`
}

// ProvisioningStep is the step index of a job's provisioning section in
// its logs: the scaler events of the agent spawned for it.
const ProvisioningStep = -2

// LogLine is one stored line of a step's output.
type LogLine struct {
	Step int       `json:"step"`
	TS   time.Time `json:"ts"`
	Text string    `json:"text"`
}

// LogPage is GET /api/v1/runs/{id}/jobs/{job}/logs?step=&cursor=. Cursor
// is an opaque position: pass Next back to read on from there.
type LogPage struct {
	Lines []LogLine `json:"lines"`
	Next  string    `json:"next"`
	// Done is true when the job has ended and everything was read.
	Done bool `json:"done"`
}

// Event is one Server-Sent Event of GET /api/v1/runs/{id}/events. The SSE
// event name is Kind.
type Event struct {
	// Kind is "run", "job", "step" (status changes), "log", or "scaler"
	// (a step of provisioning an agent for the job: EventType, AgentID and
	// Detail say which).
	Kind   string    `json:"kind"`
	RunID  string    `json:"run_id"`
	Job    string    `json:"job,omitempty"`
	JobID  string    `json:"job_id,omitempty"`
	Step   *int      `json:"step,omitempty"`
	Status string    `json:"status,omitempty"`
	Error  string    `json:"error,omitempty"`
	Lines  []LogLine `json:"lines,omitempty"`
	// EventType, AgentID and Detail describe a "scaler" event.
	EventType string `json:"event_type,omitempty"`
	AgentID   string `json:"agent_id,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// QueueEntry is one element of GET /api/v1/queue.
type QueueEntry struct {
	JobID    string    `json:"job_id"`
	RunID    string    `json:"run_id"`
	Job      string    `json:"job"`
	Labels   []string  `json:"labels"`
	Status   string    `json:"status"`
	AgentID  string    `json:"agent_id,omitempty"`
	Attempts int       `json:"dispatch_attempts"`
	Enqueued time.Time `json:"enqueued_at"`
	// WhyPending says in words why the job waits.
	WhyPending string `json:"why_pending"`
}

// Queue is a page of GET /api/v1/queue?limit=&cursor=, oldest first.
type Queue struct {
	Jobs []QueueEntry `json:"jobs"`
	// NextCursor, passed as ?cursor=, reads the page after this one; empty
	// on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Agent is one element of GET /api/v1/agents.
type Agent struct {
	ID          string    `json:"id"`
	Labels      []string  `json:"labels"`
	BusyJobs    []string  `json:"busy_jobs"`
	Backend     string    `json:"backend"`
	Version     string    `json:"version,omitempty"`
	Hostname    string    `json:"hostname,omitempty"`
	ConnectedAt time.Time `json:"connected_at"`
	// Draining is true while an operator has drained the agent: it takes
	// no new job and finishes the ones it has (see Drains for why).
	Draining bool `json:"draining,omitempty"`
}

// PeerList is GET /api/v1/peers: the orchestrators of this database as
// the answering one sees them.
type PeerList struct {
	// Self is the answering orchestrator's instance id.
	Self string `json:"self"`
	// Leader is the id of the node that runs the singleton duties, ""
	// while none holds the leader lease.
	Leader string `json:"leader"`
	Peers  []Peer `json:"peers"`
}

// Peer is one node of the cluster.
type Peer struct {
	ID string `json:"id"`
	// Role is standalone, coordinator or worker.
	Role string `json:"role"`
	// Address is its public URL (KICI_PUBLIC_URL); for a worker, the
	// address a coordinator last heard it from.
	Address string `json:"address"`
	// Connected is true while its heartbeat is current.
	Connected bool `json:"connected"`
	// LastSeen is its last heartbeat.
	LastSeen time.Time `json:"last_seen"`
}

// AgentList is GET /api/v1/agents.
type AgentList struct {
	Agents []Agent `json:"agents"`
	// Drains are every drained agent id, connected or not, by id.
	Drains []AgentDrain `json:"drains"`
}

// AgentDrain is one drained agent: POST /api/v1/agents/{id}/drain answers
// with it, and GET /api/v1/agents lists them. A drain outlives the
// agent's reconnects and the orchestrator's restarts until DELETE
// /api/v1/agents/{id}/drain lifts it.
type AgentDrain struct {
	AgentID   string    `json:"agent_id"`
	Reason    string    `json:"reason,omitempty"`
	DrainedBy string    `json:"drained_by,omitempty"`
	DrainedAt time.Time `json:"drained_at"`
}

// AgentDrainRequest is the body of POST /api/v1/agents/{id}/drain.
type AgentDrainRequest struct {
	// Reason says why, for the agent list and the queue's why_pending.
	Reason string `json:"reason,omitempty"`
}

// AgentTokenRequest is POST /api/v1/agent-tokens.
type AgentTokenRequest struct {
	// Labels are the labels an agent using the token may register with;
	// empty allows any.
	Labels []string `json:"labels"`
	// ExpiresIn is how long the token is valid, as a Go duration ("720h");
	// empty means it never expires.
	ExpiresIn string `json:"expires_in,omitempty"`
}

// AgentToken is the answer to AgentTokenRequest: the token is shown only
// this once.
type AgentToken struct {
	ID        string     `json:"id"`
	Token     string     `json:"token"`
	Labels    []string   `json:"labels"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// AgentTokenInfo is one element of GET /api/v1/agent-tokens: never the
// token itself.
type AgentTokenInfo struct {
	ID     string   `json:"id"`
	Labels []string `json:"labels"`
	// CreatedBy is the ID of the admin token that created it, or
	// "bootstrap".
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	// Agents is how many connected agents use it now.
	Agents int `json:"connected_agents"`
}

// AgentTokenList is GET /api/v1/agent-tokens.
type AgentTokenList struct {
	Tokens []AgentTokenInfo `json:"tokens"`
}

// AgentTokenRevoked is the answer to DELETE /api/v1/agent-tokens/{id}.
type AgentTokenRevoked struct {
	ID string `json:"id"`
	// Disconnected is how many live agents using the token were
	// disconnected (close code 4010).
	Disconnected int `json:"disconnected"`
}

// AdminTokenRequest is POST /api/v1/tokens.
type AdminTokenRequest struct {
	// Name says whose or what the token is.
	Name string `json:"name"`
	// Role is owner, admin or auditor.
	Role string `json:"role"`
	// ExpiresIn is how long the token is valid, as a Go duration;
	// empty means it never expires.
	ExpiresIn string `json:"expires_in,omitempty"`
}

// AdminToken is an admin token. Token is set only in the answer to
// AdminTokenRequest: it is shown only that once.
type AdminToken struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Role  string `json:"role"`
	Token string `json:"token,omitempty"`
	// Prefix is the start of the token, to recognise it by.
	Prefix string `json:"prefix"`
	// CreatedBy is the ID of the token that created it, or "bootstrap".
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// AdminTokenList is GET /api/v1/tokens.
type AdminTokenList struct {
	Tokens []AdminToken `json:"tokens"`
}

// SecretRequest is PUT /api/v1/secrets/{name}?source=S.
type SecretRequest struct {
	Value string `json:"value"`
}

// Secret is a secret's metadata. No answer of the API ever carries a
// secret's value.
type Secret struct {
	Name string `json:"name"`
	// Source is the one source whose jobs may receive it; "" for every
	// source (or for an environment's secret).
	Source string `json:"source"`
	// Environment is the deployment environment whose jobs alone receive
	// it, when it is an environment's secret.
	Environment string    `json:"environment,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// UpdatedBy is the ID of the admin token that last set it.
	UpdatedBy string `json:"updated_by"`
	// KeyVersion is the generation of the key it is sealed under.
	KeyVersion int `json:"key_version"`
}

// SecretList is GET /api/v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

// RotateKeyRequest is POST /api/v1/secrets/rotate-key.
type RotateKeyRequest struct {
	// NewKey is the new secret key: 64 hex digits.
	NewKey string `json:"new_key"`
}

// RotateKeyResponse is what a key rotation did.
type RotateKeyResponse struct {
	// Resealed is how many secrets were re-encrypted.
	Resealed   int `json:"resealed"`
	KeyVersion int `json:"key_version"`
	// Fingerprint names the new key without revealing it.
	Fingerprint string `json:"fingerprint"`
	// KeyFile is the key file now holding the new key; empty when the key
	// comes from KICI_SECRET_KEY.
	KeyFile string `json:"key_file,omitempty"`
	// Note says what the operator must do next.
	Note string `json:"note"`
}

// AuditEntry is one element of GET /api/v1/audit.
type AuditEntry struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	// ActorType is admin_token, bootstrap, agent_token, job_token,
	// scaler_agent or anonymous.
	ActorType string `json:"actor_type"`
	ActorID   string `json:"actor_id,omitempty"`
	ActorName string `json:"actor_name,omitempty"`
	Role      string `json:"role,omitempty"`
	// Action names what was attempted, e.g. "secret.set".
	Action string `json:"action"`
	Target string `json:"target,omitempty"`
	// Outcome is allowed, denied or failed.
	Outcome    string `json:"outcome"`
	Status     int    `json:"status,omitempty"`
	Detail     string `json:"detail,omitempty"`
	ClientAddr string `json:"client_addr,omitempty"`
}

// AuditList is GET /api/v1/audit?actor=&action=&outcome=&since=&before=&limit=,
// newest first. Next, when set, is the before= of the next page.
type AuditList struct {
	Entries []AuditEntry `json:"entries"`
	Next    string       `json:"next,omitempty"`
}

// DiagnoseCheck is one check of GET /api/v1/diagnose.
type DiagnoseCheck struct {
	// Name says what was checked, e.g. "database" or "scaler metal: binary [linux]".
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Detail is what the check found, in one line.
	Detail string `json:"detail"`
	// Fix is one line saying how to make a failed check pass; "" when OK.
	Fix string `json:"fix,omitempty"`
}

// Diagnosis is GET /api/v1/diagnose: every check the orchestrator ran on
// itself (database, migrations, data dir, keys, scaler backends), in order.
type Diagnosis struct {
	Checks []DiagnoseCheck `json:"checks"`
}

// Delivery is one element of GET /api/v1/sources/{name}/deliveries: a
// webhook delivery (or a redelivery) and what became of it.
type Delivery struct {
	ID string `json:"id"`
	// DeliveryID is the provider's id of the delivery (X-GitHub-Delivery,
	// X-Kici-Delivery); empty when it sent none.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Event is the provider's event name (push, pull_request, ping, …).
	Event      string    `json:"event"`
	ReceivedAt time.Time `json:"received_at"`
	// Verdict is one of accepted, duplicate, ignored, rejected_signature,
	// invalid_payload, invalid_workflow, no_match, failed.
	Verdict string `json:"verdict"`
	// Detail explains the verdict; a stored verdict that the list above
	// does not name (rejected_too_large, …) is its first word.
	Detail string `json:"detail,omitempty"`
	// Error is what went wrong; for invalid_workflow one
	// FILE:LINE:COL: message per line.
	Error string `json:"error,omitempty"`
	// Runs are the ids of the runs the delivery started.
	Runs       []string `json:"runs"`
	ClientAddr string   `json:"client_addr,omitempty"`
	UserAgent  string   `json:"user_agent,omitempty"`
	BodyBytes  int64    `json:"body_bytes"`
	// Redeliverable says whether the body was kept, so that kici-admin
	// sources redeliver can run it again.
	Redeliverable bool `json:"redeliverable"`
	// RedeliveryOf is, for a redelivery, the id of the delivery re-run.
	RedeliveryOf string `json:"redelivery_of,omitempty"`
}

// DeliveryList is a page of GET /api/v1/sources/{name}/deliveries
// ?limit=&cursor=, newest first.
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
	// NextCursor, passed as ?cursor=, reads the page after this one
	// (older deliveries); empty on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Redelivery is POST /api/v1/sources/{name}/deliveries/{id}/redeliver: the
// new delivery recorded and what running it did.
type Redelivery struct {
	Delivery Delivery `json:"delivery"`
	TriggerResponse
}

// Schedule is one schedule trigger of a workflow at a source's default
// branch head, as GET /api/v1/schedules lists it.
type Schedule struct {
	Source   string `json:"source"`
	Workflow string `json:"workflow"`
	// File is the workflow file that declares the schedule.
	File string `json:"file,omitempty"`
	// Cron is the five-field spec, evaluated in UTC.
	Cron string `json:"cron"`
	// SHA is the default branch head the schedule was read at.
	SHA string `json:"sha"`
	// NextTick is the next tick of the spec after now; nil when the spec
	// never fires again (e.g. 30 February).
	NextTick *time.Time `json:"next_tick"`
	// LastRun is the workflow's newest scheduled run (for any of its
	// specs); nil when none was started (or it was deleted).
	LastRun *ScheduledRun `json:"last_run"`
}

// ScheduledRun is a run that a schedule tick started.
type ScheduledRun struct {
	// Tick is the tick (UTC) that started the run.
	Tick time.Time `json:"tick"`
	// RunID is the run; Status its status, empty when the run was deleted
	// (retention) since.
	RunID  string `json:"run_id"`
	Status string `json:"status,omitempty"`
}

// ScheduleProblem is a source whose schedules could not be read (or read
// completely) at the last refresh.
type ScheduleProblem struct {
	Source string `json:"source"`
	// Error says what failed, one problem per line: the default branch
	// could not be resolved or its workflows read (the schedules listed
	// for the source are then those last read), some files are invalid
	// (each FILE:LINE:COL: message; the valid ones are listed and tick),
	// or a tick's run could not be created.
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// ScheduleList is GET /api/v1/schedules: every schedule trigger of every
// source, sorted by source, workflow and spec.
type ScheduleList struct {
	Schedules []Schedule        `json:"schedules"`
	Problems  []ScheduleProblem `json:"problems,omitempty"`
	// RefreshedAt is when the answering orchestrator last read the
	// sources' workflows; zero before the first read completed.
	RefreshedAt time.Time `json:"refreshed_at"`
}

// Environment is a deployment environment's protection
// (GET /api/v1/environments, PUT /api/v1/environments/{name}).
type Environment struct {
	Name string `json:"name"`
	// RequireApproval holds each job of the environment in
	// awaiting_approval until someone with run.approve approves it.
	RequireApproval bool `json:"require_approval"`
	// Branches are the globs of the branches whose runs may deploy to it;
	// empty means any.
	Branches  []string  `json:"branches"`
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by"`
}

// EnvironmentRequest is the body of PUT /api/v1/environments/{name}.
type EnvironmentRequest struct {
	RequireApproval bool     `json:"require_approval"`
	Branches        []string `json:"branches"`
}

// EnvironmentList is GET /api/v1/environments.
type EnvironmentList struct {
	Environments []Environment `json:"environments"`
}

// JobAwaitingApproval is the status the API gives a job held for its
// environment's approval (the store keeps it waiting).
const JobAwaitingApproval = "awaiting_approval"
