package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUpdateJobStatusIsGuarded(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		tests := []struct {
			name        string
			transition  func(id string) JobTransition
			wantChanged bool
			wantErr     error
			anyErr      bool // any error will do; wantErr is ignored
			wantStatus  JobStatus
		}{
			{
				name: "allowed from-state",
				transition: func(id string) JobTransition {
					return JobTransition{ID: id, From: []JobStatus{JobQueued}, To: JobDispatched, AgentID: new("agent-1")}
				},
				wantChanged: true,
				wantStatus:  JobDispatched,
			},
			{
				name: "one of several from-states",
				transition: func(id string) JobTransition {
					return JobTransition{ID: id, From: []JobStatus{JobWaiting, JobQueued}, To: JobCancelled}
				},
				wantChanged: true,
				wantStatus:  JobCancelled,
			},
			{
				name: "wrong from-state",
				transition: func(id string) JobTransition {
					return JobTransition{ID: id, From: []JobStatus{JobRunning}, To: JobSuccess, Error: new("nope")}
				},
				wantChanged: false,
				wantStatus:  JobQueued,
			},
			{
				name: "missing job",
				transition: func(string) JobTransition {
					return JobTransition{ID: "missing", From: []JobStatus{JobQueued}, To: JobRunning}
				},
				wantErr: ErrNotFound,
			},
			{
				name: "no from-state",
				transition: func(id string) JobTransition {
					return JobTransition{ID: id, To: JobRunning}
				},
				wantErr:    errNoFrom,
				wantStatus: JobQueued,
			},
			{
				name: "status outside the vocabulary",
				transition: func(id string) JobTransition {
					return JobTransition{ID: id, From: []JobStatus{JobQueued}, To: "exploded"}
				},
				anyErr:     true,
				wantStatus: JobQueued,
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				run := createTestRun(t, db, testJob("build", []string{"linux"}))
				id := run.Jobs[0].ID
				changed, err := db.UpdateJobStatus(ctx, tt.transition(id))
				switch {
				case tt.anyErr:
					if err == nil {
						t.Errorf("update: got no error, want one")
					}
				case !errors.Is(err, tt.wantErr):
					t.Errorf("update: got error %v, want %v", err, tt.wantErr)
				}
				if changed != tt.wantChanged {
					t.Errorf("update: got changed %t, want %t", changed, tt.wantChanged)
				}
				if tt.wantStatus == "" {
					return
				}
				job, err := db.GetJob(ctx, id)
				if err != nil {
					t.Fatalf("get job: %v", err)
				}
				if job.Status != tt.wantStatus {
					t.Errorf("got status %q, want %q", job.Status, tt.wantStatus)
				}
				if !tt.wantChanged && (job.Error != "" || job.AgentID != "") {
					t.Errorf("got error %q and agent %q after a refused update, want both unchanged (empty)", job.Error, job.AgentID)
				}
			})
		}
	})
}

func TestUpdateJobStatusFields(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		id := run.Jobs[0].ID
		started, finished := testNow.Add(1e9), testNow.Add(5e9)
		steps := []JobTransition{
			{ID: id, From: []JobStatus{JobQueued}, To: JobDispatched, AgentID: new("agent-1"), Attempt: new(1)},
			{ID: id, From: []JobStatus{JobDispatched}, To: JobRunning, StartedAt: &started},
			{ID: id, From: []JobStatus{JobRunning}, To: JobFailure, Error: new("exit 2"), FinishedAt: &finished},
		}
		for _, tr := range steps {
			if changed, err := db.UpdateJobStatus(ctx, tr); err != nil || !changed {
				t.Fatalf("update to %q: got (%t, %v), want (true, nil)", tr.To, changed, err)
			}
		}
		job, err := db.GetJob(ctx, id)
		if err != nil {
			t.Fatalf("get job: %v", err)
		}
		type fields struct {
			Status              JobStatus
			AgentID, Error      string
			Attempt             int
			StartedAt, Finished any
		}
		got := fields{job.Status, job.AgentID, job.Error, job.Attempt, job.StartedAt, job.FinishedAt}
		want := fields{JobFailure, "agent-1", "exit 2", 1, &started, &finished}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("job (-want +got):\n%s", diff)
		}

		// An empty string clears the error; nil leaves it.
		if _, err := db.UpdateJobStatus(ctx, JobTransition{ID: id, From: []JobStatus{JobFailure}, To: JobFailure}); err != nil {
			t.Fatalf("update without error: %v", err)
		}
		if job, _ := db.GetJob(ctx, id); job.Error != "exit 2" {
			t.Errorf("got error %q after an update without Error, want it kept", job.Error)
		}
		if _, err := db.UpdateJobStatus(ctx, JobTransition{ID: id, From: []JobStatus{JobFailure}, To: JobFailure, Error: new("")}); err != nil {
			t.Fatalf("update clearing error: %v", err)
		}
		if job, _ := db.GetJob(ctx, id); job.Error != "" {
			t.Errorf("got error %q after clearing it, want empty", job.Error)
		}
	})
}

func TestUpdateRunAndStepStatusAreGuarded(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		jobID := run.Jobs[0].ID
		tests := []struct {
			name        string
			update      func() (bool, error)
			wantChanged bool
			wantErr     error
		}{
			{name: "run wrong from-state", update: func() (bool, error) {
				return db.UpdateRunStatus(ctx, RunTransition{ID: run.ID, From: []RunStatus{RunRunning}, To: RunSuccess})
			}},
			{name: "run allowed from-state", wantChanged: true, update: func() (bool, error) {
				return db.UpdateRunStatus(ctx, RunTransition{ID: run.ID, From: []RunStatus{RunPending}, To: RunRunning,
					StartedAt: new(testNow)})
			}},
			{name: "run moved on, old from-state refused", update: func() (bool, error) {
				return db.UpdateRunStatus(ctx, RunTransition{ID: run.ID, From: []RunStatus{RunPending}, To: RunCancelled})
			}},
			{name: "run missing", wantErr: ErrNotFound, update: func() (bool, error) {
				return db.UpdateRunStatus(ctx, RunTransition{ID: "missing", From: []RunStatus{RunPending}, To: RunRunning})
			}},
			{name: "run to failure with error", wantChanged: true, update: func() (bool, error) {
				return db.UpdateRunStatus(ctx, RunTransition{ID: run.ID, From: []RunStatus{RunRunning}, To: RunFailure,
					Error: new("build failed"), FinishedAt: new(testNow.Add(1e9))})
			}},
			{name: "step wrong from-state", update: func() (bool, error) {
				return db.UpdateStepStatus(ctx, StepTransition{JobID: jobID, Index: 0, From: []StepStatus{StepRunning}, To: StepSuccess})
			}},
			{name: "step allowed from-state", wantChanged: true, update: func() (bool, error) {
				return db.UpdateStepStatus(ctx, StepTransition{JobID: jobID, Index: 0, From: []StepStatus{StepPending}, To: StepRunning})
			}},
			{name: "step to failure with exit code", wantChanged: true, update: func() (bool, error) {
				return db.UpdateStepStatus(ctx, StepTransition{JobID: jobID, Index: 0, From: []StepStatus{StepRunning}, To: StepFailure,
					ExitCode: new(2), Error: new("exit status 2")})
			}},
			{name: "step missing index", wantErr: ErrNotFound, update: func() (bool, error) {
				return db.UpdateStepStatus(ctx, StepTransition{JobID: jobID, Index: 9, From: []StepStatus{StepPending}, To: StepRunning})
			}},
		}
		// Not parallel: the cases walk one run and one step through their
		// states in order.
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				changed, err := tt.update()
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("got error %v, want %v", err, tt.wantErr)
				}
				if changed != tt.wantChanged {
					t.Errorf("got changed %t, want %t", changed, tt.wantChanged)
				}
			})
		}
		got, err := db.GetRun(ctx, run.ID)
		if err != nil {
			t.Fatalf("get run: %v", err)
		}
		if got.Status != RunFailure || got.Error != "build failed" || got.StartedAt == nil || got.FinishedAt == nil {
			t.Errorf("got run status %q error %q started %v finished %v, want failure, %q and both times",
				got.Status, got.Error, got.StartedAt, got.FinishedAt, "build failed")
		}
		step := got.Jobs[0].Steps[0]
		if step.Status != StepFailure || step.ExitCode == nil || *step.ExitCode != 2 || step.Error != "exit status 2" {
			t.Errorf("got step %+v, want failure with exit code 2 and its error", step)
		}
		if next := got.Jobs[0].Steps[1]; next.Status != StepPending || next.ExitCode != nil {
			t.Errorf("got second step %+v, want it untouched", next)
		}
	})
}

func TestApplyJobMessageDeduplicates(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		id := run.Jobs[0].ID
		tests := []struct {
			name string
			seq  int64
			want bool
		}{
			{name: "first message", seq: 1, want: true},
			{name: "same message again", seq: 1, want: false},
			{name: "skip ahead", seq: 3, want: true},
			{name: "older message", seq: 2, want: false},
			{name: "next message", seq: 4, want: true},
		}
		// Not parallel: each case depends on the sequence applied before.
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.ApplyJobMessage(ctx, id, tt.seq)
				if err != nil {
					t.Fatalf("apply %d: %v", tt.seq, err)
				}
				if got != tt.want {
					t.Errorf("apply %d: got %t, want %t", tt.seq, got, tt.want)
				}
			})
		}
		if _, err := db.ApplyJobMessage(ctx, "missing", 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("apply to a missing job: got %v, want ErrNotFound", err)
		}

		// In one transaction with the write it protects: if that write fails,
		// the sequence bump is rolled back too, so a redelivery is applied.
		errWrite := errors.New("write failed")
		err := db.Tx(ctx, func(tx *Tx) error {
			if ok, err := tx.ApplyJobMessage(ctx, id, 5); err != nil || !ok {
				t.Fatalf("apply 5 in tx: got (%t, %v), want (true, nil)", ok, err)
			}
			return errWrite
		})
		if !errors.Is(err, errWrite) {
			t.Fatalf("tx: got %v, want %v", err, errWrite)
		}
		err = db.Tx(ctx, func(tx *Tx) error {
			ok, err := tx.ApplyJobMessage(ctx, id, 5)
			if err != nil {
				return err
			}
			if !ok {
				t.Errorf("apply 5 again after rollback: got false, want true")
			}
			_, err = tx.UpdateStepStatus(ctx, StepTransition{JobID: id, Index: 0, From: []StepStatus{StepPending}, To: StepRunning})
			return err
		})
		if err != nil {
			t.Fatalf("tx: %v", err)
		}
		job, err := db.GetJob(ctx, id)
		if err != nil {
			t.Fatalf("get job: %v", err)
		}
		if job.LastSeq != 5 || job.Steps[0].Status != StepRunning {
			t.Errorf("got last seq %d and step status %q, want 5 and %q", job.LastSeq, job.Steps[0].Status, StepRunning)
		}

		// A new dispatch starts the sequence again, in its status update.
		ok, err := db.UpdateJobStatus(ctx, JobTransition{ID: id, From: []JobStatus{JobQueued}, To: JobDispatched, ResetSeq: true})
		if err != nil || !ok {
			t.Fatalf("dispatch with ResetSeq: (%t, %v)", ok, err)
		}
		if again, err := db.ApplyJobMessage(ctx, id, 1); err != nil || !again {
			t.Errorf("apply 1 after the new dispatch: got (%t, %v), want (true, nil)", again, err)
		}
	})
}

// TestGuardedUpdateHasOneWinner races goroutines on one transition: the
// guard is checked and written in one statement, so exactly one wins.
func TestGuardedUpdateHasOneWinner(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		id := run.Jobs[0].ID
		const racers = 8
		wins := make(chan string, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				agent := fmt.Sprintf("agent-%d", i)
				changed, err := db.UpdateJobStatus(ctx, JobTransition{
					ID: id, From: []JobStatus{JobQueued}, To: JobDispatched, AgentID: &agent,
				})
				if err != nil {
					t.Errorf("%s: %v", agent, err)
				}
				if changed {
					wins <- agent
				}
			})
		}
		wg.Wait()
		close(wins)
		var winners []string
		for w := range wins {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("got winners %q, want exactly one", winners)
		}
		job, err := db.GetJob(ctx, id)
		if err != nil {
			t.Fatalf("get job: %v", err)
		}
		if job.AgentID != winners[0] {
			t.Errorf("got agent %q, want the winner %q", job.AgentID, winners[0])
		}
	})
}
