package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCheckReports(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		t0 := testNow
		if _, err := db.GetCheckReport(ctx, run.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get before enqueue: got %v, want ErrNotFound", err)
		}
		if err := db.EnqueueCheckReport(ctx, run.ID, "o/r", CheckNone, t0); err == nil {
			t.Errorf("enqueue state none: got no error, want one")
		}
		if err := db.EnqueueCheckReport(ctx, run.ID, "o/r", CheckQueued, t0); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := db.NextCheckReportAt(ctx); err != nil || !ok {
			t.Fatalf("next after enqueue: got (%v, %v), want a time", ok, err)
		}
		due, err := db.DueCheckReports(ctx, t0, 10)
		if err != nil || len(due) != 1 || due[0].Desired != CheckQueued || due[0].Reported != CheckNone || due[0].CheckRunID != 0 {
			t.Fatalf("due: got (%+v, %v), want the run's row wanting queued, with no check run", due, err)
		}
		// A failure postpones the row and counts the attempt.
		retry := t0.Add(time.Minute)
		if err := db.FailCheckReport(ctx, run.ID, "502 Bad Gateway", retry, false, t0); err != nil {
			t.Fatal(err)
		}
		if due, _ := db.DueCheckReports(ctx, retry.Add(-time.Microsecond), 10); len(due) != 0 {
			t.Errorf("due before the retry time: got %d rows, want none", len(due))
		}
		if next, _, _ := db.NextCheckReportAt(ctx); !next.Equal(retry) {
			t.Errorf("next: got %v, want %v", next, retry)
		}
		// Enqueuing a state behind or at the desired one changes nothing.
		if err := db.EnqueueCheckReport(ctx, run.ID, "o/r", CheckQueued, t0); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetCheckReport(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Attempts != 1 || got.LastError != "502 Bad Gateway" || !got.NextAttemptAt.Equal(retry) {
			t.Errorf("after a failure and a same-state enqueue: got %+v, want 1 attempt, the error, next at %v", got, retry)
		}
		// The creation is recorded with the check run's id; a later
		// state is desired from then on.
		if err := db.RecordCheckReport(ctx, run.ID, 4242, CheckQueued, retry); err != nil {
			t.Fatal(err)
		}
		if err := db.EnqueueCheckReport(ctx, run.ID, "o/r", CheckCompleted, retry); err != nil {
			t.Fatal(err)
		}
		// Recording a state behind the stored one changes nothing.
		if err := db.RecordCheckReport(ctx, run.ID, 1, CheckNone, retry); err != nil {
			t.Fatal(err)
		}
		got, err = db.GetCheckReport(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := CheckReport{RunID: run.ID, Repo: "o/r", CheckRunID: 4242, Desired: CheckCompleted, Reported: CheckQueued,
			NextAttemptAt: retry, UpdatedAt: retry}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("after record and enqueue (-want +got):\n%s", diff)
		}
		// Giving up leaves nothing due.
		if err := db.FailCheckReport(ctx, run.ID, "404 Not Found", retry, true, retry); err != nil {
			t.Fatal(err)
		}
		if due, _ := db.DueCheckReports(ctx, retry.Add(time.Hour), 10); len(due) != 0 {
			t.Errorf("due after giving up: got %d rows, want none", len(due))
		}
		if _, ok, _ := db.NextCheckReportAt(ctx); ok {
			t.Errorf("next after giving up: got one, want none")
		}
	})
}

func TestCheckReportGivenUpIsRetriedOnANewState(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		if err := db.EnqueueCheckReport(ctx, run.ID, "o/r", CheckQueued, testNow); err != nil {
			t.Fatal(err)
		}
		if err := db.FailCheckReport(ctx, run.ID, "401 Bad credentials", testNow, true, testNow); err != nil {
			t.Fatal(err)
		}
		later := testNow.Add(time.Hour)
		if err := db.EnqueueCheckReport(ctx, run.ID, "o/r", CheckInProgress, later); err != nil {
			t.Fatal(err)
		}
		due, err := db.DueCheckReports(ctx, later, 10)
		if err != nil || len(due) != 1 {
			t.Fatalf("due after a new state: got (%v, %v), want the row", due, err)
		}
		if due[0].Attempts != 0 || due[0].GaveUpAt != nil || due[0].Desired != CheckInProgress {
			t.Errorf("got %+v, want 0 attempts, not given up, in_progress desired", due[0])
		}
	})
}
