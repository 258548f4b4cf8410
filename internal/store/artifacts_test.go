package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/workflow"
)

// newRunWithJobs creates a run of source "repo" with jobs of these names.
func newRunWithJobs(t *testing.T, db *store.DB, names ...string) store.Run {
	t.Helper()
	nr := store.NewRun{Source: "repo", Workflow: "ci", WorkflowFile: ".kici/workflows/ci.yml", EventKind: "push", Ref: "refs/heads/main"}
	for _, n := range names {
		nr.Jobs = append(nr.Jobs, store.NewJob{Spec: workflow.Job{Name: n, Base: n, Steps: []workflow.Step{{Name: "s", Run: "true"}}}})
	}
	run, err := db.CreateRun(t.Context(), nr)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestArtifactManifest: an artifact reads back with its files; a later
// upload of the same job replaces it and names the replaced blob; the
// run's total leaves out the job being replaced.
func TestArtifactManifest(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		run := newRunWithJobs(t, db, "build", "test")
		t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		exp := t0.Add(7 * 24 * time.Hour)
		first := store.Artifact{ID: store.NewID(), RunID: run.ID, JobID: run.Jobs[0].ID, JobName: "build", BlobKey: "artifacts/r/1",
			Size: 100, SHA256: "aa", FileCount: 2, ContentBytes: 300,
			Files: []store.ArtifactFile{{Path: "dist/a", Size: 100}, {Path: "dist/b", Size: 200}}, CreatedAt: t0, ExpiresAt: &exp}
		if replaced, err := db.PutArtifact(ctx, first); err != nil || replaced != "" {
			t.Fatalf("put first: got %q, %v, want no replaced blob", replaced, err)
		}
		other := store.Artifact{ID: store.NewID(), RunID: run.ID, JobID: run.Jobs[1].ID, JobName: "test", BlobKey: "artifacts/r/2",
			Size: 50, SHA256: "bb", CreatedAt: t0}
		if _, err := db.PutArtifact(ctx, other); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetArtifact(ctx, run.ID, "build")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("artifact read back (-want +got):\n%s", diff)
		}
		second := first
		second.ID, second.BlobKey, second.Size, second.ExpiresAt = store.NewID(), "artifacts/r/3", 70, nil
		if replaced, err := db.PutArtifact(ctx, second); err != nil || replaced != "artifacts/r/1" {
			t.Fatalf("put second: got %q, %v, want the first's blob replaced", replaced, err)
		}
		list, err := db.ListArtifacts(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, a := range list {
			keys = append(keys, a.JobName+"="+a.BlobKey)
		}
		if diff := cmp.Diff([]string{"build=artifacts/r/3", "test=artifacts/r/2"}, keys); diff != "" {
			t.Errorf("artifacts of the run (-want +got):\n%s", diff)
		}
		if n, err := db.RunArtifactBytes(ctx, run.ID, "build"); err != nil || n != 50 {
			t.Errorf("run bytes without build: got %d, %v, want 50", n, err)
		}
		if n, err := db.RunArtifactBytes(ctx, run.ID, ""); err != nil || n != 120 {
			t.Errorf("run bytes: got %d, %v, want 120", n, err)
		}
		if _, err := db.GetArtifact(ctx, run.ID, "deploy"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("artifact of a job without one: got %v, want ErrNotFound", err)
		}
	})
}

// TestSweepableArtifacts: the sweep finds the artifacts that expired and
// those whose run retention deleted, and nothing else.
func TestSweepableArtifacts(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		kept := newRunWithJobs(t, db, "a", "b", "c")
		gone := newRunWithJobs(t, db, "a")
		now := time.Now().UTC()
		past, future := now.Add(-time.Minute), now.Add(time.Hour)
		put := func(run store.Run, job, key string, exp *time.Time) {
			t.Helper()
			if _, err := db.PutArtifact(ctx, store.Artifact{ID: store.NewID(), RunID: run.ID, JobName: job, BlobKey: key, ExpiresAt: exp}); err != nil {
				t.Fatal(err)
			}
		}
		put(kept, "a", "expired", &past)
		put(kept, "b", "not-yet", &future)
		put(kept, "c", "with-the-run", nil)
		put(gone, "a", "run-deleted", nil)
		// Retention deletes the finished run.
		ended := now.Add(-time.Minute)
		if _, err := db.UpdateRunStatus(ctx, store.RunTransition{ID: gone.ID, From: []store.RunStatus{store.RunPending},
			To: store.RunSuccess, FinishedAt: &ended}); err != nil {
			t.Fatal(err)
		}
		ids, err := db.DeleteRunsFinishedBefore(ctx, now.Add(time.Hour), 10)
		if err != nil || !slices.Contains(ids, gone.ID) {
			t.Fatalf("retention: got %v, %v, want run %s deleted", ids, err, gone.ID)
		}
		list, err := db.SweepableArtifacts(ctx, now, 10)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, a := range list {
			keys = append(keys, a.BlobKey)
		}
		slices.Sort(keys)
		if diff := cmp.Diff([]string{"expired", "run-deleted"}, keys); diff != "" {
			t.Errorf("sweepable artifacts (-want +got):\n%s", diff)
		}
		for _, a := range list {
			if err := db.DeleteArtifact(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
		}
		all, err := db.ArtifactBlobKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]bool{"not-yet": true, "with-the-run": true}, all); diff != "" {
			t.Errorf("blob keys after the sweep (-want +got):\n%s", diff)
		}
	})
}
