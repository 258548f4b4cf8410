package store

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/workflow"
)

// runInSource creates a run of source with one job "job" (not enqueued)
// and returns it.
func runInSource(t *testing.T, db *DB, source string) Run {
	t.Helper()
	nr := testRun(testJob("job", nil))
	nr.Source = source
	nr.Jobs[0].Enqueue, nr.Jobs[0].Status = false, JobWaiting
	run, err := db.CreateRun(t.Context(), nr)
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	return run
}

func addLimits(t *testing.T, db *DB, rows ...JobConcurrency) {
	t.Helper()
	if err := db.Tx(t.Context(), func(tx *Tx) error { return tx.AddJobConcurrency(t.Context(), rows) }); err != nil {
		t.Fatalf("add job concurrency: %v", err)
	}
}

func TestRunGroupMembership(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		g := GroupRef{Source: "repo", Group: "deploy"}
		a, b, c := runInSource(t, db, "repo"), runInSource(t, db, "repo"), runInSource(t, db, "repo")
		other := runInSource(t, db, "other") // same group name, another source
		err := db.Tx(ctx, func(tx *Tx) error {
			if err := tx.LockRunGroup(ctx, g); err != nil {
				return err
			}
			for _, m := range []RunGroup{
				{RunID: a.ID, Source: "repo", Group: "deploy", State: RunGroupWaiting},
				{RunID: b.ID, Source: "repo", Group: "deploy", State: RunGroupApproval},
				{RunID: c.ID, Source: "repo", Group: "deploy", State: RunGroupWaiting, CancelInProgress: true},
				{RunID: other.ID, Source: "other", Group: "deploy", State: RunGroupWaiting},
			} {
				if _, err := tx.JoinRunGroup(ctx, m); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		members := func() []string {
			t.Helper()
			got, err := db.ListRunGroup(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, m := range got {
				out = append(out, fmt.Sprintf("%s %s %d %v", m.RunID, m.State, m.Seq, m.CancelInProgress))
			}
			return out
		}
		want := []string{a.ID + " waiting 1 false", c.ID + " waiting 2 true"}
		if diff := cmp.Diff(want, members()); diff != "" {
			t.Errorf("members (-want +got):\n%s", diff)
		}

		// Approving b makes it the newest member; starting a clears the
		// error its wait set.
		err = db.Tx(ctx, func(tx *Tx) error {
			if m, ok, err := tx.EnterRunGroup(ctx, b.ID); err != nil || !ok || m.Seq != 3 {
				return fmt.Errorf("enter approved run: got %+v %v %v, want seq 3", m, ok, err)
			}
			if _, ok, err := tx.EnterRunGroup(ctx, b.ID); err != nil || ok {
				return fmt.Errorf("enter again: got %v %v, want false", ok, err)
			}
			if _, err := tx.SetPendingRunError(ctx, a.ID, "waiting"); err != nil {
				return err
			}
			if ok, err := tx.StartRunGroupMember(ctx, a.ID); err != nil || !ok {
				return fmt.Errorf("start a: %v %v", ok, err)
			}
			return tx.SetRunGroupCancelNote(ctx, c.ID, "cancelled by a newer run")
		})
		if err != nil {
			t.Fatal(err)
		}
		want = []string{a.ID + " active 1 false", c.ID + " waiting 2 true", b.ID + " waiting 3 false"}
		if diff := cmp.Diff(want, members()); diff != "" {
			t.Errorf("members after approval and start (-want +got):\n%s", diff)
		}
		if got, _ := db.GetRun(ctx, a.ID); got.Error != "" {
			t.Errorf("error of the started run: got %q, want none", got.Error)
		}
		if m, ok, err := db.GetRunGroup(ctx, c.ID); err != nil || !ok || m.CancelNote != "cancelled by a newer run" {
			t.Errorf("group of c: got %+v %v %v, want its cancel note", m, ok, err)
		}
		if _, ok, err := db.GetRunGroup(ctx, runInSource(t, db, "repo").ID); err != nil || ok {
			t.Errorf("group of a run without one: got %v %v, want none", ok, err)
		}

		waiting, err := db.RunGroupsWaiting(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]GroupRef{{"other", "deploy"}, {"repo", "deploy"}}, waiting); diff != "" {
			t.Errorf("groups with waiting runs (-want +got):\n%s", diff)
		}
		of, err := db.RunGroupsOf(ctx, []string{a.ID, c.ID, other.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(of) != 2 {
			t.Errorf("groups of three runs in two groups: got %v", of)
		}

		// Lock rows of groups unused since a moment are dropped.
		if n, err := db.PruneConcurrencyLocks(ctx, testNow.Add(-time.Hour)); err != nil || n != 0 {
			t.Errorf("prune before the locks were taken: got %d %v, want 0", n, err)
		}
		if n, err := db.PruneConcurrencyLocks(ctx, time.Now().Add(24*time.Hour)); err != nil || n != 1 {
			t.Errorf("prune after: got %d %v, want the one lock row", n, err)
		}

		// An ended run leaves the group.
		if _, err := db.UpdateRunStatus(ctx, RunTransition{ID: a.ID, From: []RunStatus{RunPending}, To: RunSuccess}); err != nil {
			t.Fatal(err)
		}
		want = []string{c.ID + " waiting 2 true", b.ID + " waiting 3 false"}
		if diff := cmp.Diff(want, members()); diff != "" {
			t.Errorf("members after a ended (-want +got):\n%s", diff)
		}
	})
}

// TestRunGroupConcurrentCreators: two transactions each add a run to one
// group at the same moment and start it if no member is active. The
// group's lock makes the second see the first: one run is active, the
// other waits.
func TestRunGroupConcurrentCreators(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		for round := range 10 {
			g := GroupRef{Source: "repo", Group: fmt.Sprintf("g-%d", round)}
			runs := []Run{runInSource(t, db, "repo"), runInSource(t, db, "repo")}
			start := make(chan struct{})
			errs := make(chan error, len(runs))
			for _, r := range runs {
				go func() {
					<-start
					errs <- db.Tx(ctx, func(tx *Tx) error {
						if err := tx.LockRunGroup(ctx, g); err != nil {
							return err
						}
						members, err := tx.ListRunGroup(ctx, g)
						if err != nil {
							return err
						}
						if _, err := tx.JoinRunGroup(ctx, RunGroup{RunID: r.ID, Source: g.Source, Group: g.Group, State: RunGroupWaiting}); err != nil {
							return err
						}
						for _, m := range members {
							if m.State == RunGroupActive {
								return nil // it waits
							}
						}
						_, err = tx.StartRunGroupMember(ctx, r.ID)
						return err
					})
				}()
			}
			close(start)
			for range runs {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			members, err := db.ListRunGroup(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			states := map[RunGroupState]int{}
			for _, m := range members {
				states[m.State]++
			}
			if diff := cmp.Diff(map[RunGroupState]int{RunGroupActive: 1, RunGroupWaiting: 1}, states); diff != "" {
				t.Fatalf("round %d: member states (-want +got):\n%s", round, diff)
			}
			if members[0].Seq != 1 || members[1].Seq != 2 {
				t.Errorf("round %d: seqs %d, %d, want 1, 2", round, members[0].Seq, members[1].Seq)
			}
		}
	})
}

func TestClaimWaitsForJobGroup(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		first, second, elsewhere := runInSource(t, db, "repo"), runInSource(t, db, "repo"), runInSource(t, db, "other")
		for _, r := range []Run{first, second, elsewhere} {
			addLimits(t, db, JobConcurrency{JobID: r.Jobs[0].ID, RunID: r.ID, Source: r.Source, Group: "deploy-main"})
			enqueue(t, db, r.ID, r.Jobs[0].ID, nil, nil)
		}
		claim := func() string {
			t.Helper()
			e, ok, err := db.ClaimForAgent(ctx, testOwner, "a", nil, ackDeadline)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return ""
			}
			return e.JobID
		}
		if got := claim(); got != first.Jobs[0].ID {
			t.Fatalf("first claim: got %q, want the first job", got)
		}
		// The second job of the group waits; the same group name in
		// another source is another group.
		if got := claim(); got != elsewhere.Jobs[0].ID {
			t.Fatalf("second claim: got %q, want the other source's job", got)
		}
		if got := claim(); got != "" {
			t.Fatalf("third claim: got %q, want nothing while the group is busy", got)
		}
		if _, ok, err := db.ClaimJob(ctx, testOwner, second.Jobs[0].ID, "bound", ackDeadline); err != nil || ok {
			t.Fatalf("claim of the waiting job by an agent bound to it: got %v %v, want false", ok, err)
		}
		waits, err := db.ConcurrencyWaits(ctx, []string{second.Jobs[0].ID, first.Jobs[0].ID})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{second.Jobs[0].ID: fmt.Sprintf(`waiting for concurrency group "deploy-main" (run %s job job is in it)`, first.ID)}
		if diff := cmp.Diff(want, waits); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
		if _, err := db.Dequeue(ctx, first.Jobs[0].ID); err != nil {
			t.Fatal(err)
		}
		if got := claim(); got != second.Jobs[0].ID {
			t.Fatalf("claim after the first ended: got %q, want the second job", got)
		}
	})
}

func TestClaimWaitsForMaxParallel(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		var jobs []workflow.Job
		for i := range 3 {
			j := testJob(fmt.Sprintf("build (n=%d)", i), nil)
			j.Base, j.Matrix = "build", map[string]string{"n": fmt.Sprint(i)}
			jobs = append(jobs, j)
		}
		jobs = append(jobs, testJob("lint", nil))
		run := createTestRun(t, db, jobs...)
		for _, j := range run.Jobs[:3] {
			addLimits(t, db, JobConcurrency{JobID: j.ID, RunID: run.ID, Source: run.Source, Base: "build", MaxParallel: 2})
		}
		var got []string
		for {
			e, ok, err := db.ClaimForAgent(ctx, testOwner, "a", nil, ackDeadline)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			j, _ := db.GetJob(ctx, e.JobID)
			got = append(got, j.Name)
		}
		if diff := cmp.Diff([]string{"build (n=0)", "build (n=1)", "lint"}, got); diff != "" {
			t.Errorf("claimed (-want +got):\n%s", diff)
		}
		waits, err := db.ConcurrencyWaits(ctx, []string{run.Jobs[2].ID})
		if err != nil {
			t.Fatal(err)
		}
		want := `waiting for a max-parallel slot: matrix job "build" runs at most 2 at once (in progress: build (n=0), build (n=1))`
		if waits[run.Jobs[2].ID] != want {
			t.Errorf("why: got %q, want %q", waits[run.Jobs[2].ID], want)
		}
	})
}

// TestConcurrentClaimsRespectLimits: claimers racing for the jobs of one
// group, or of one matrix with max-parallel 2, each in its own
// transaction, dispatch no more than the limit; on PostgreSQL that is the
// lock taken after the claim (confirmClaim).
func TestConcurrentClaimsRespectLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		limit int
		seed  func(t *testing.T, db *DB, round int) []string
	}{
		{name: "job group", limit: 1, seed: func(t *testing.T, db *DB, round int) []string {
			var ids []string
			for range 4 {
				r := runInSource(t, db, "repo")
				addLimits(t, db, JobConcurrency{JobID: r.Jobs[0].ID, RunID: r.ID, Source: "repo", Group: fmt.Sprintf("g-%d", round)})
				enqueue(t, db, r.ID, r.Jobs[0].ID, nil, nil)
				ids = append(ids, r.Jobs[0].ID)
			}
			return ids
		}},
		{name: "max-parallel", limit: 2, seed: func(t *testing.T, db *DB, round int) []string {
			var jobs []workflow.Job
			for i := range 5 {
				j := testJob(fmt.Sprintf("build (n=%d)", i), nil)
				j.Base, j.Matrix = "build", map[string]string{"n": fmt.Sprint(i)}
				jobs = append(jobs, j)
			}
			run := createTestRun(t, db, jobs...)
			var ids []string
			for _, j := range run.Jobs {
				addLimits(t, db, JobConcurrency{JobID: j.ID, RunID: run.ID, Source: "repo", Base: "build", MaxParallel: 2})
				ids = append(ids, j.ID)
			}
			return ids
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEachEngine(t, func(t *testing.T, db *DB) {
				ctx := t.Context()
				for round := range 8 {
					ids := tt.seed(t, db, round)
					start := make(chan struct{})
					var wg sync.WaitGroup
					for c := range len(ids) {
						wg.Go(func() {
							<-start
							err := db.Tx(ctx, func(tx *Tx) error {
								_, _, err := tx.ClaimForAgent(ctx, testOwner, fmt.Sprintf("agent-%d", c), nil, ackDeadline)
								return err
							})
							if err != nil {
								t.Errorf("claim: %v", err)
							}
						})
					}
					close(start)
					wg.Wait()
					dispatched := 0
					for _, id := range ids {
						e, err := db.GetQueueEntry(ctx, id)
						if err != nil {
							t.Fatal(err)
						}
						if e.Status == QueueDispatched {
							dispatched++
						} else if e.AgentID != "" || e.Owner != "" {
							t.Errorf("pending row %s kept agent %q owner %q", id, e.AgentID, e.Owner)
						}
					}
					if dispatched > tt.limit || dispatched == 0 {
						t.Fatalf("round %d: %d jobs dispatched, want 1 to %d", round, dispatched, tt.limit)
					}
					for _, id := range ids { // out of the way of the next round
						if _, err := db.Dequeue(ctx, id); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
		})
	}
}

func TestJobGroupsAndFailFast(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		var jobs []workflow.Job
		for i := range 3 {
			j := testJob(fmt.Sprintf("build (n=%d)", i), nil)
			j.Base, j.Matrix = "build", map[string]string{"n": fmt.Sprint(i)}
			jobs = append(jobs, j)
		}
		run := createTestRun(t, db, jobs...)
		var rows []JobConcurrency
		for _, j := range run.Jobs {
			rows = append(rows, JobConcurrency{JobID: j.ID, RunID: run.ID, Source: run.Source, Group: "g", Base: "build", FailFast: true})
		}
		addLimits(t, db, rows...)

		members, err := db.ListJobGroup(ctx, GroupRef{"repo", "g"})
		if err != nil || len(members) != 3 || members[0].JobID != run.Jobs[0].ID || members[0].Job != "build (n=0)" {
			t.Fatalf("members: got %+v %v, want the three jobs in queue order", members, err)
		}
		contended, err := db.JobGroupsContended(ctx)
		if err != nil || !cmp.Equal(contended, []GroupRef{{"repo", "g"}}) {
			t.Errorf("contended groups: got %v %v", contended, err)
		}

		if got, err := db.ListFailFast(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("fail-fast before a failure: got %v %v, want none", got, err)
		}
		for _, st := range []JobStatus{JobDispatched, JobRunning, JobFailure} {
			if _, err := db.UpdateJobStatus(ctx, JobTransition{ID: run.Jobs[1].ID, From: []JobStatus{JobQueued, JobDispatched, JobRunning}, To: st}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.UpdateJobStatus(ctx, JobTransition{ID: run.Jobs[2].ID, From: []JobStatus{JobQueued}, To: JobSkipped}); err != nil {
			t.Fatal(err)
		}
		want := []FailFast{{RunID: run.ID, JobID: run.Jobs[1].ID, Job: "build (n=1)", Base: "build", Others: []string{run.Jobs[0].ID}}}
		for _, ids := range [][]string{nil, {run.Jobs[1].ID, run.Jobs[0].ID}} {
			got, err := db.ListFailFast(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("fail-fast of %v (-want +got):\n%s", ids, diff)
			}
		}
		if got, _ := db.ListFailFast(ctx, []string{run.Jobs[0].ID}); len(got) != 0 {
			t.Errorf("fail-fast of a job that did not fail: got %v, want none", got)
		}
	})
}

func TestConcurrencyWaitsOfFreeJobs(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		r := runInSource(t, db, "repo")
		addLimits(t, db, JobConcurrency{JobID: r.Jobs[0].ID, RunID: r.ID, Source: "repo", Group: "g"})
		enqueue(t, db, r.ID, r.Jobs[0].ID, nil, nil)
		waits, err := db.ConcurrencyWaits(t.Context(), []string{r.Jobs[0].ID, "no-such-job"})
		if err != nil || len(waits) != 0 {
			t.Errorf("waits of a free job: got %v %v, want none", waits, err)
		}
	})
}
