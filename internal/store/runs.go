package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/workflow"
)

// Run is one execution of one workflow for one event.
type Run struct {
	ID     string
	Source string
	// Workflow and WorkflowFile name the workflow and its file in the
	// repository.
	Workflow     string
	WorkflowFile string
	// Event is the normalised event, as JSON, and EventKind its kind
	// (push, tag, pull_request, manual, …).
	Event     json.RawMessage
	EventKind string
	Ref       string
	SHA       string
	Status    RunStatus
	// Error says why a run failed or was cancelled, or why it awaits
	// approval; empty otherwise.
	Error string
	// Plan is the compiled workflow the run executes.
	Plan workflow.Workflow
	// ParentRunID is the run this one re-runs; empty for a first run.
	ParentRunID string
	CreatedAt   time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	// Jobs are in creation order, each with its steps. Only GetRun and
	// CreateRun fill them.
	Jobs []Job
}

// Job is one job of a run.
type Job struct {
	ID     string
	RunID  string
	Name   string
	Status JobStatus
	// RunsOn are the labels an agent must all carry.
	RunsOn []string
	// Spec is the compiled job.
	Spec workflow.Job
	// AgentID is the agent the job was last dispatched to; empty before.
	AgentID string
	Error   string
	// Attempt counts the job's attempts as its caller defines them.
	Attempt int
	// Retries counts the times the job went back to the queue for another
	// attempt after one ended (the workflow's retry:; see RetryJob): the
	// job is on attempt Retries+1.
	Retries int
	// QueuedAt is when the job last entered the queue; nil if it never
	// did. Every move to queued stamps it.
	QueuedAt *time.Time
	// LastSeq is the highest agent message sequence number applied to the
	// job (see ApplyJobMessage).
	LastSeq    int64
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	// Steps are by index. Only GetRun, GetJob and CreateRun fill them.
	Steps []Step
	// SpecJSON is the spec still encoded. Only GetRunOutline sets it, and
	// then leaves Spec empty: DecodeSpec fills Spec from it, so a caller
	// that needs the specs of few jobs decodes only those.
	SpecJSON json.RawMessage
}

// DecodeSpec fills Spec from SpecJSON, once; it does nothing when the spec
// is already decoded.
func (j *Job) DecodeSpec() error {
	if j.SpecJSON == nil {
		return nil
	}
	if err := json.Unmarshal(j.SpecJSON, &j.Spec); err != nil {
		return fmt.Errorf("decode spec of job %q: %w", j.ID, err)
	}
	j.SpecJSON = nil
	return nil
}

// Step is one step of a job.
type Step struct {
	JobID string
	// Index is the step's 0-based position in the job.
	Index  int
	Name   string
	Status StepStatus
	// ExitCode is the step's exit status; nil until it has one.
	ExitCode   *int
	Error      string
	StartedAt  *time.Time
	FinishedAt *time.Time
}

// JobNeed is one edge of a run's needs graph: JobID may run only after
// NeedsJobID ended with a status in RunOn.
type JobNeed struct {
	JobID      string
	NeedsJobID string
	RunOn      []string
}

// NewRun is what CreateRun writes.
type NewRun struct {
	// ID is the new run's ID; empty means NewID.
	ID           string
	Source       string
	Workflow     string
	WorkflowFile string
	Event        json.RawMessage
	EventKind    string
	Ref          string
	SHA          string
	// Status is the initial status; empty means RunPending.
	Status RunStatus
	// Error is the initial error ("" for none), such as why a run awaits
	// approval.
	Error       string
	Plan        workflow.Workflow
	ParentRunID string
	Jobs        []NewJob
	// QueueExpiresAt is the expiry of the queue rows CreateRun writes; nil
	// means they never expire.
	QueueExpiresAt *time.Time
}

// NewJob is one job of a NewRun.
type NewJob struct {
	// ID is the new job's ID; empty means NewID.
	ID string
	// Spec is the compiled job. Its Name names the job, its RunsOn are the
	// job's labels, one step row is written per entry of its Steps, and one
	// needs edge per entry of its Needs (each naming a job of the same run).
	Spec workflow.Job
	// Status is the initial status; empty means JobWaiting.
	Status JobStatus
	// Enqueue writes a pending dispatch queue row for the job, labelled
	// with Spec.RunsOn.
	Enqueue bool
}

const runColumns = "id, source, workflow, workflow_file, event, event_kind, ref, sha, status, error, plan, parent_run_id, created_at, started_at, finished_at"

func scanRun(row interface{ Scan(...any) error }) (Run, error) {
	var r Run
	err := row.Scan(&r.ID, &r.Source, &r.Workflow, &r.WorkflowFile, rawJSONCol{&r.Event}, &r.EventKind,
		&r.Ref, &r.SHA, &r.Status, stringCol{&r.Error}, jsonCol[workflow.Workflow]{&r.Plan},
		stringCol{&r.ParentRunID}, timeCol{&r.CreatedAt}, nullTimeCol{&r.StartedAt}, nullTimeCol{&r.FinishedAt})
	return r, err
}

// runHeadColumns are runColumns without the plan, for reads that do not
// need it (decoding a large workflow's plan is most of such a read).
const runHeadColumns = "id, source, workflow, workflow_file, event, event_kind, ref, sha, status, error, parent_run_id, created_at, started_at, finished_at"

func scanRunHead(row interface{ Scan(...any) error }) (Run, error) {
	var r Run
	err := row.Scan(&r.ID, &r.Source, &r.Workflow, &r.WorkflowFile, rawJSONCol{&r.Event}, &r.EventKind,
		&r.Ref, &r.SHA, &r.Status, stringCol{&r.Error},
		stringCol{&r.ParentRunID}, timeCol{&r.CreatedAt}, nullTimeCol{&r.StartedAt}, nullTimeCol{&r.FinishedAt})
	return r, err
}

func scanJobEncoded(row interface{ Scan(...any) error }) (Job, error) {
	var j Job
	err := row.Scan(&j.ID, &j.RunID, &j.Name, &j.Status, jsonCol[[]string]{&j.RunsOn}, rawJSONCol{&j.SpecJSON},
		stringCol{&j.AgentID}, stringCol{&j.Error}, &j.Attempt, &j.LastSeq,
		timeCol{&j.CreatedAt}, nullTimeCol{&j.StartedAt}, nullTimeCol{&j.FinishedAt}, &j.Retries, nullTimeCol{&j.QueuedAt})
	return j, err
}

const jobColumns = "id, run_id, name, status, runs_on, spec, agent_id, error, attempt, last_seq, created_at, started_at, finished_at, retries, queued_at"

func scanJob(row interface{ Scan(...any) error }) (Job, error) {
	var j Job
	err := row.Scan(&j.ID, &j.RunID, &j.Name, &j.Status, jsonCol[[]string]{&j.RunsOn}, jsonCol[workflow.Job]{&j.Spec},
		stringCol{&j.AgentID}, stringCol{&j.Error}, &j.Attempt, &j.LastSeq,
		timeCol{&j.CreatedAt}, nullTimeCol{&j.StartedAt}, nullTimeCol{&j.FinishedAt}, &j.Retries, nullTimeCol{&j.QueuedAt})
	return j, err
}

const stepColumns = "job_id, idx, name, status, exit_code, error, started_at, finished_at"

func scanStep(row interface{ Scan(...any) error }) (Step, error) {
	var s Step
	err := row.Scan(&s.JobID, &s.Index, &s.Name, &s.Status, nullIntCol{&s.ExitCode}, stringCol{&s.Error},
		nullTimeCol{&s.StartedAt}, nullTimeCol{&s.FinishedAt})
	return s, err
}

// CreateRun writes a run with its jobs, steps and needs edges, and a queue
// row for each job marked Enqueue, in one transaction: either all of it is
// written or none. It returns the run as written, jobs and steps included.
func (db *DB) CreateRun(ctx context.Context, nr NewRun) (Run, error) {
	var run Run
	err := db.Tx(ctx, func(tx *Tx) error {
		var err error
		run, err = tx.CreateRun(ctx, nr)
		return err
	})
	return run, err
}

// CreateRun is DB.CreateRun inside tx.
func (tx *Tx) CreateRun(ctx context.Context, nr NewRun) (Run, error) {
	run, err := tx.createRun(ctx, nr)
	if err != nil {
		return Run{}, fmt.Errorf("create run of workflow %q: %w", nr.Workflow, classify(err))
	}
	return run, nil
}

func (tx *Tx) createRun(ctx context.Context, nr NewRun) (Run, error) {
	run := Run{
		ID: nr.ID, Source: nr.Source, Workflow: nr.Workflow, WorkflowFile: nr.WorkflowFile,
		Event: nr.Event, EventKind: nr.EventKind, Ref: nr.Ref, SHA: nr.SHA,
		Status: nr.Status, Error: nr.Error, Plan: nr.Plan, ParentRunID: nr.ParentRunID,
		CreatedAt: tx.clock.Now(),
	}
	if run.ID == "" {
		run.ID = NewID()
	}
	if run.Status == "" {
		run.Status = RunPending
	}
	if len(run.Event) == 0 {
		run.Event = json.RawMessage("null")
	}
	if !json.Valid(run.Event) {
		return Run{}, errors.New("event is not valid JSON")
	}
	plan, err := jsonArg(run.Plan)
	if err != nil {
		return Run{}, err
	}
	_, err = tx.exec(ctx,
		"INSERT INTO runs ("+runColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		run.ID, run.Source, run.Workflow, run.WorkflowFile, string(run.Event), run.EventKind, run.Ref, run.SHA,
		string(run.Status), nullStringArg(nr.Error), plan, nullStringArg(run.ParentRunID), timeArg(run.CreatedAt), nil, nil)
	if err != nil {
		return Run{}, fmt.Errorf("insert run: %w", err)
	}

	// One multi-row INSERT per table (in batches), not one statement per
	// job, step, edge and queue row: on PostgreSQL each statement is a
	// round trip, and a 250-job matrix took half a second to create.
	idByName := make(map[string]string, len(nr.Jobs))
	var jobRows, stepRows, needRows, queueRows [][]any
	for _, nj := range nr.Jobs {
		job := newJob(run.ID, nj, tx.clock.Now())
		spec, err := jsonArg(job.Spec)
		if err != nil {
			return Run{}, err
		}
		jobRows = append(jobRows, []any{job.ID, job.RunID, job.Name, string(job.Status), stringsArg(job.RunsOn), spec,
			nil, nil, 0, 0, timeArg(job.CreatedAt), nil, nil, 0, nullTimeArg(job.QueuedAt)})
		for _, st := range job.Steps {
			stepRows = append(stepRows, []any{st.JobID, st.Index, st.Name, string(st.Status)})
		}
		idByName[job.Name] = job.ID
		run.Jobs = append(run.Jobs, job)
	}
	for i, nj := range nr.Jobs {
		job := &run.Jobs[i]
		for _, need := range nj.Spec.Needs {
			upstream, ok := idByName[need.Job]
			if !ok {
				return Run{}, fmt.Errorf("job %q needs %q, which is not a job of the run", job.Name, need.Job)
			}
			needRows = append(needRows, []any{job.ID, upstream, stringsArg(need.On)})
		}
		if nj.Enqueue {
			e := newQueueEntry(NewQueueEntry{JobID: job.ID, RunID: run.ID, Labels: job.RunsOn, ExpiresAt: nr.QueueExpiresAt}, tx.clock.Now())
			queueRows = append(queueRows, queueInsertArgs(e))
		}
	}
	if err := tx.insertRows(ctx, "jobs", jobColumns, jobRows); err != nil {
		return Run{}, err
	}
	if err := tx.insertRows(ctx, "steps", "job_id, idx, name, status", stepRows); err != nil {
		return Run{}, err
	}
	if err := tx.insertRows(ctx, "job_needs", "job_id, needs_job_id, run_on", needRows); err != nil {
		return Run{}, err
	}
	if err := tx.insertRows(ctx, "dispatch_queue", queueInsertColumns, queueRows); err != nil {
		return Run{}, err
	}
	return run, nil
}

// newJob is the job nj becomes in run runID, steps included, as it is
// inserted.
func newJob(runID string, nj NewJob, now time.Time) Job {
	job := Job{
		ID: nj.ID, RunID: runID, Name: nj.Spec.Name, Status: nj.Status,
		RunsOn: nj.Spec.RunsOn, Spec: nj.Spec, CreatedAt: now,
	}
	if job.ID == "" {
		job.ID = NewID()
	}
	if job.Status == "" {
		job.Status = JobWaiting
	}
	if job.Status == JobQueued {
		job.QueuedAt = &job.CreatedAt
	}
	if job.RunsOn == nil {
		job.RunsOn = []string{}
	}
	for i, st := range job.Spec.Steps {
		job.Steps = append(job.Steps, Step{JobID: job.ID, Index: i, Name: st.Name, Status: StepPending})
	}
	return job
}

// maxInsertParams bounds the placeholders of one multi-row INSERT, well
// under SQLite's limit (32766) and PostgreSQL's (65535).
const maxInsertParams = 8000

// insertRows inserts rows (each one value per column of columns) into
// table with multi-row INSERT statements.
func (tx *Tx) insertRows(ctx context.Context, table, columns string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	width := len(rows[0])
	per := max(1, maxInsertParams/width)
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	for start := 0; start < len(rows); start += per {
		batch := rows[start:min(start+per, len(rows))]
		var q strings.Builder
		q.WriteString("INSERT INTO " + table + " (" + columns + ") VALUES ")
		args := make([]any, 0, len(batch)*width)
		for i, r := range batch {
			if len(r) != width {
				return fmt.Errorf("insert into %s: row %d has %d values, want %d", table, start+i, len(r), width)
			}
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(one)
			args = append(args, r...)
		}
		if _, err := tx.uncached().exec(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("insert %d rows into %s: %w", len(batch), table, err)
		}
	}
	return nil
}

// GetRun returns the run with its jobs and their steps, read from one
// snapshot, or ErrNotFound.
func (db *DB) GetRun(ctx context.Context, id string) (Run, error) {
	var run Run
	err := db.readTx(ctx, func(tx *Tx) error {
		var err error
		run, err = tx.GetRun(ctx, id)
		return err
	})
	return run, err
}

// GetRun is DB.GetRun inside tx.
func (tx *Tx) GetRun(ctx context.Context, id string) (Run, error) {
	run, err := scanRun(tx.queryRow(ctx, "SELECT "+runColumns+" FROM runs WHERE id = ?", id))
	if err != nil {
		return Run{}, fmt.Errorf("get run %q: %w", id, classify(err))
	}
	run.Jobs, err = tx.listJobs(ctx, "run_id = ?", id)
	if err != nil {
		return Run{}, fmt.Errorf("get run %q: %w", id, err)
	}
	return run, nil
}

// GetRunHead returns the run's own row, or ErrNotFound: Plan and Jobs are
// left empty. It is the read for paths that need the run's event, source
// and commit, such as building a dispatch.
func (q *queries) GetRunHead(ctx context.Context, id string) (Run, error) {
	run, err := scanRunHead(q.queryRow(ctx, "SELECT "+runHeadColumns+" FROM runs WHERE id = ?", id))
	if err != nil {
		return Run{}, fmt.Errorf("get run %q: %w", id, classify(err))
	}
	return run, nil
}

// GetRunOutline returns the run's row (as GetRunHead) with its jobs in
// creation order, or ErrNotFound. The jobs come without steps and with
// their specs still encoded (see Job.DecodeSpec): the scheduler reads a
// run after every job that ends, and decoding every spec and step of a
// wide run each time made a run's cost grow with the square of its width.
func (tx *Tx) GetRunOutline(ctx context.Context, id string) (Run, error) {
	run, err := tx.GetRunHead(ctx, id)
	if err != nil {
		return Run{}, err
	}
	if run.Jobs, err = tx.queryJobs(ctx, scanJobEncoded, "run_id = ?", id); err != nil {
		return Run{}, fmt.Errorf("get run %q: %w", id, err)
	}
	return run, nil
}

// CountRunJobs returns how many jobs of the run are in each status (a
// status no job has is absent). It reads no job rows, so the scheduler can
// tell cheaply that a run has nothing to advance.
func (tx *Tx) CountRunJobs(ctx context.Context, runID string) (map[JobStatus]int, error) {
	rows, err := tx.query(ctx, "SELECT status, COUNT(*) FROM jobs WHERE run_id = ? GROUP BY status", runID)
	if err != nil {
		return nil, fmt.Errorf("count jobs of run %q: %w", runID, err)
	}
	defer rows.Close()
	out := map[JobStatus]int{}
	for rows.Next() {
		var st JobStatus
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs of run %q: %w", runID, err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs of run %q: %w", runID, err)
	}
	return out, nil
}

// GetJob returns the job with its steps, read from one snapshot, or
// ErrNotFound.
func (db *DB) GetJob(ctx context.Context, id string) (Job, error) {
	var job Job
	err := db.readTx(ctx, func(tx *Tx) error {
		var err error
		job, err = tx.GetJob(ctx, id)
		return err
	})
	return job, err
}

// GetJob is DB.GetJob inside tx.
func (tx *Tx) GetJob(ctx context.Context, id string) (Job, error) {
	jobs, err := tx.listJobs(ctx, "id = ?", id)
	if err == nil && len(jobs) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return Job{}, fmt.Errorf("get job %q: %w", id, err)
	}
	return jobs[0], nil
}

// GetRunJob returns the job of run runID whose id or name is key, with its
// steps, read from one snapshot; ErrNotFound when the run has no such job.
// It reads that job only, not the whole run.
func (db *DB) GetRunJob(ctx context.Context, runID, key string) (Job, error) {
	var job Job
	err := db.readTx(ctx, func(tx *Tx) error {
		jobs, err := tx.listJobs(ctx, "run_id = ? AND (id = ? OR name = ?)", runID, key, key)
		if err == nil && len(jobs) == 0 {
			err = ErrNotFound
		}
		if err != nil {
			return err
		}
		job = jobs[0]
		return nil
	})
	if err != nil {
		return Job{}, fmt.Errorf("get job %q of run %q: %w", key, runID, err)
	}
	return job, nil
}

// GetJobHead returns the job's own row, or ErrNotFound: without its steps,
// and with its spec still encoded (see Job.DecodeSpec). It is the read of
// the paths that run for every agent message, which need the job's agent,
// run and status, not its steps.
func (q *queries) GetJobHead(ctx context.Context, id string) (Job, error) {
	j, err := scanJobEncoded(q.queryRow(ctx, "SELECT "+jobColumns+" FROM jobs WHERE id = ?", id))
	if err != nil {
		return Job{}, fmt.Errorf("get job %q: %w", id, classify(err))
	}
	return j, nil
}

// ListJobSteps returns the steps of the job by index; none for a job that
// does not exist.
func (q *queries) ListJobSteps(ctx context.Context, jobID string) ([]Step, error) {
	rows, err := q.query(ctx, "SELECT "+stepColumns+" FROM steps WHERE job_id = ? ORDER BY idx", jobID)
	if err != nil {
		return nil, fmt.Errorf("list steps of job %q: %w", jobID, err)
	}
	defer rows.Close()
	var out []Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("list steps of job %q: %w", jobID, err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list steps of job %q: %w", jobID, err)
	}
	return out, nil
}

// queryJobs returns the job rows matching where (a condition on jobs with
// its arguments) in creation order, each read by scan, without steps.
func (tx *Tx) queryJobs(ctx context.Context, scan func(interface{ Scan(...any) error }) (Job, error), where string, args ...any) ([]Job, error) {
	rows, err := tx.query(ctx, "SELECT "+jobColumns+" FROM jobs WHERE "+where+" ORDER BY created_at, id", args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		j, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// listJobs returns the jobs matching where (a condition on jobs with its
// arguments), each with its steps.
func (tx *Tx) listJobs(ctx context.Context, where string, args ...any) ([]Job, error) {
	jobs, err := tx.queryJobs(ctx, scanJob, where, args...)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	index := make(map[string]int, len(jobs))
	for i, j := range jobs {
		index[j.ID] = i
	}
	rows, err := tx.query(ctx,
		"SELECT "+stepColumns+" FROM steps WHERE job_id IN (SELECT id FROM jobs WHERE "+where+") ORDER BY job_id, idx", args...)
	if err != nil {
		return nil, fmt.Errorf("list steps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		s, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("list steps: %w", err)
		}
		if i, ok := index[s.JobID]; ok {
			jobs[i].Steps = append(jobs[i].Steps, s)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list steps: %w", err)
	}
	return jobs, nil
}

// RunFilter selects runs for ListRuns. Zero fields do not filter.
type RunFilter struct {
	Status   RunStatus
	Source   string
	Workflow string
	// Branch matches a run whose ref is the branch's name or
	// refs/heads/<name>.
	Branch string
	// Limit caps the number of runs; zero means 50, and more than 1000
	// means 1000.
	Limit int
}

// ListRuns returns runs, newest first, without their jobs.
func (q *queries) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	var (
		where []string
		args  []any
	)
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(f.Status))
	}
	if f.Source != "" {
		where = append(where, "source = ?")
		args = append(args, f.Source)
	}
	if f.Workflow != "" {
		where = append(where, "workflow = ?")
		args = append(args, f.Workflow)
	}
	if f.Branch != "" {
		where = append(where, "(ref = ? OR ref = ?)")
		args = append(args, f.Branch, "refs/heads/"+f.Branch)
	}
	query := "SELECT " + runColumns + " FROM runs"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = 50
	case limit > 1000:
		limit = 1000
	}
	query += " ORDER BY created_at DESC, id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// ListJobNeeds returns the needs edges between the jobs of a run.
func (q *queries) ListJobNeeds(ctx context.Context, runID string) ([]JobNeed, error) {
	rows, err := q.query(ctx,
		`SELECT n.job_id, n.needs_job_id, n.run_on FROM job_needs n
		 JOIN jobs j ON j.id = n.job_id
		 WHERE j.run_id = ?
		 ORDER BY n.job_id, n.needs_job_id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list needs of run %q: %w", runID, err)
	}
	defer rows.Close()
	var needs []JobNeed
	for rows.Next() {
		var n JobNeed
		if err := rows.Scan(&n.JobID, &n.NeedsJobID, jsonCol[[]string]{&n.RunOn}); err != nil {
			return nil, fmt.Errorf("list needs of run %q: %w", runID, err)
		}
		needs = append(needs, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list needs of run %q: %w", runID, err)
	}
	return needs, nil
}
