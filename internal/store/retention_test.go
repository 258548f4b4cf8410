package store

import (
	"slices"
	"testing"
	"time"
)

// TestRetention: finished runs older than the cutoff go with their jobs,
// steps and queue rows, oldest first and at most limit at a time; runs
// still active stay however old; audit entries and webhook events go by
// their own times.
func TestRetention(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		finish := func(run Run, to RunStatus, at time.Time) {
			t.Helper()
			ok, err := db.UpdateRunStatus(ctx, RunTransition{ID: run.ID, From: []RunStatus{RunPending}, To: to, FinishedAt: &at})
			if err != nil || !ok {
				t.Fatalf("finish run: (%t, %v)", ok, err)
			}
		}
		day := 24 * time.Hour
		oldest := createTestRun(t, db, testJob("a", []string{"linux"}), testJob("b", nil, "a"))
		finish(oldest, RunSuccess, testNow.Add(-40*day))
		older := createTestRun(t, db, testJob("a", nil))
		finish(older, RunCancelled, testNow.Add(-35*day))
		recent := createTestRun(t, db, testJob("a", nil))
		finish(recent, RunFailure, testNow.Add(-day))
		active := createTestRun(t, db, testJob("a", nil)) // pending since long ago, as far as the cutoff knows
		cutoff := testNow.Add(-30 * day)

		ids, err := db.DeleteRunsFinishedBefore(ctx, cutoff, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, []string{oldest.ID}) {
			t.Fatalf("first batch of 1: got %v, want the oldest run %s", ids, oldest.ID)
		}
		if ids, err = db.DeleteRunsFinishedBefore(ctx, cutoff, 100); err != nil || !slices.Equal(ids, []string{older.ID}) {
			t.Fatalf("second batch: got (%v, %v), want the older run %s", ids, err, older.ID)
		}
		if ids, err = db.DeleteRunsFinishedBefore(ctx, cutoff, 100); err != nil || len(ids) != 0 {
			t.Fatalf("third batch: got (%v, %v), want nothing left to delete", ids, err)
		}
		for _, r := range []Run{recent, active} {
			if _, err := db.GetRun(ctx, r.ID); err != nil {
				t.Errorf("run %s was deleted: %v", r.ID, err)
			}
		}
		if _, err := db.GetRun(ctx, oldest.ID); err == nil {
			t.Error("the oldest run is still there")
		}
		// Everything of the deleted runs went with them: only the two
		// remaining runs' one job each is left.
		if n := countRows(t, db, "jobs"); n != 2 {
			t.Errorf("jobs left: %d, want 2", n)
		}
		if n := countRows(t, db, "steps"); n != 4 {
			t.Errorf("steps left: %d, want 4", n)
		}
		if n := countRows(t, db, "job_needs"); n != 0 {
			t.Errorf("needs edges left: %d, want 0", n)
		}
		if _, err := db.DeleteRunsFinishedBefore(ctx, cutoff, 0); err == nil {
			t.Error("limit 0 accepted")
		}

		if _, err := db.InsertAudit(ctx, AuditEntry{ActorType: "anonymous", Action: "test.one", Outcome: "allowed"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.RecordWebhookEvent(ctx, WebhookEvent{Source: "s", Verdict: "processed", ReceivedAt: testNow.Add(-10 * day)}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.RecordWebhookEvent(ctx, WebhookEvent{Source: "s", Verdict: "processed"}); err != nil {
			t.Fatal(err)
		}
		if n, err := db.DeleteAuditBefore(ctx, testNow.Add(-time.Second)); err != nil || n != 0 {
			t.Errorf("audit before its entry: deleted (%d, %v), want 0", n, err)
		}
		if n, err := db.DeleteAuditBefore(ctx, testNow.Add(time.Second)); err != nil || n != 1 {
			t.Errorf("audit after its entry: deleted (%d, %v), want 1", n, err)
		}
		if n, err := db.DeleteWebhookEventsBefore(ctx, testNow.Add(-day)); err != nil || n != 1 {
			t.Errorf("webhook events: deleted (%d, %v), want the one 10 days old", n, err)
		}
		if n := countRows(t, db, "webhook_events"); n != 1 {
			t.Errorf("webhook events left: %d, want 1", n)
		}
	})
}
