package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kici-dev/kici/internal/workflow"
)

var ackDeadline = testNow.Add(10 * time.Second)

// seedJobs creates one run with a job per label set, none enqueued, and
// returns the run ID and the job IDs in order.
func seedJobs(t *testing.T, db *DB, labelSets ...[]string) (string, []string) {
	t.Helper()
	var jobs []workflow.Job
	for i, labels := range labelSets {
		jobs = append(jobs, testJob(fmt.Sprintf("job-%d", i), labels))
	}
	nr := testRun(jobs...)
	for i := range nr.Jobs {
		nr.Jobs[i].Enqueue = false
	}
	run, err := db.CreateRun(t.Context(), nr)
	if err != nil {
		t.Fatalf("create run: %v", err)
	}
	var ids []string
	for _, j := range run.Jobs {
		ids = append(ids, j.ID)
	}
	return run.ID, ids
}

func enqueue(t *testing.T, db *DB, runID, jobID string, labels []string, expiresAt *time.Time) {
	t.Helper()
	if _, err := db.Enqueue(t.Context(), NewQueueEntry{JobID: jobID, RunID: runID, Labels: labels, ExpiresAt: expiresAt}); err != nil {
		t.Fatalf("enqueue %q: %v", jobID, err)
	}
}

func TestClaimIsFIFO(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		runID, ids := seedJobs(t, db, []string{"linux"}, []string{"linux"}, []string{"linux"})
		// Enqueue in another order than the jobs were created.
		order := []string{ids[2], ids[0], ids[1]}
		for _, id := range order {
			enqueue(t, db, runID, id, []string{"linux"}, nil)
		}
		var got []string
		for range order {
			e, ok, err := db.ClaimForAgent(ctx, testOwner, "agent-1", []string{"linux"}, ackDeadline)
			if err != nil || !ok {
				t.Fatalf("claim: got (%t, %v), want a row", ok, err)
			}
			got = append(got, e.JobID)
		}
		if diff := cmp.Diff(order, got); diff != "" {
			t.Errorf("claim order (-want +got):\n%s", diff)
		}
		if _, ok, err := db.ClaimForAgent(ctx, testOwner, "agent-1", []string{"linux"}, ackDeadline); err != nil || ok {
			t.Errorf("claim from an empty queue: got (%t, %v), want (false, nil)", ok, err)
		}
	})
}

func TestClaimRequiresEveryLabel(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		tests := []struct {
			name        string
			rowLabels   []string
			agentLabels []string
			want        bool
		}{
			{name: "agent lacks one label", rowLabels: []string{"linux", "gpu"}, agentLabels: []string{"linux"}, want: false},
			{name: "agent has every label", rowLabels: []string{"linux", "gpu"}, agentLabels: []string{"gpu", "linux"}, want: true},
			{name: "agent has more labels", rowLabels: []string{"linux"}, agentLabels: []string{"linux", "gpu", "kici:os:linux"}, want: true},
			{name: "row without labels fits any agent", rowLabels: nil, agentLabels: []string{"linux"}, want: true},
			{name: "row without labels fits an agent without labels", rowLabels: []string{}, agentLabels: nil, want: true},
			{name: "agent without labels", rowLabels: []string{"linux"}, agentLabels: nil, want: false},
			{name: "labels are case-sensitive", rowLabels: []string{"Linux"}, agentLabels: []string{"linux"}, want: false},
			{name: "no prefix match", rowLabels: []string{"linux-arm"}, agentLabels: []string{"linux"}, want: false},
			{name: "quotes in labels", rowLabels: []string{`it's "odd"`}, agentLabels: []string{`it's "odd"`}, want: true},
		}
		for _, tt := range tests {
			// Not parallel: each case needs the queue to itself.
			t.Run(tt.name, func(t *testing.T) {
				ctx := t.Context()
				runID, ids := seedJobs(t, db, tt.rowLabels)
				enqueue(t, db, runID, ids[0], tt.rowLabels, nil)
				t.Cleanup(func() {
					// t.Context() is done by now; the row must go all the same.
					if _, err := db.Dequeue(context.WithoutCancel(ctx), ids[0]); err != nil {
						t.Errorf("dequeue: %v", err)
					}
				})
				e, ok, err := db.ClaimForAgent(ctx, testOwner, "agent-1", tt.agentLabels, ackDeadline)
				if err != nil {
					t.Fatalf("claim: %v", err)
				}
				if ok != tt.want {
					t.Errorf("claim with %q for a row needing %q: got %t, want %t", tt.agentLabels, tt.rowLabels, ok, tt.want)
				}
				if ok && e.JobID != ids[0] {
					t.Errorf("claimed %q, want %q", e.JobID, ids[0])
				}
			})
		}
	})
}

func TestClaimSkipsNonFittingRows(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		runID, ids := seedJobs(t, db, []string{"linux", "gpu"}, []string{"linux"})
		enqueue(t, db, runID, ids[0], []string{"linux", "gpu"}, nil)
		enqueue(t, db, runID, ids[1], []string{"linux"}, nil)
		e, ok, err := db.ClaimForAgent(ctx, testOwner, "cpu-agent", []string{"linux"}, ackDeadline)
		if err != nil || !ok {
			t.Fatalf("claim: got (%t, %v), want a row", ok, err)
		}
		if e.JobID != ids[1] {
			t.Errorf("claimed %q, want the younger row %q that fits", e.JobID, ids[1])
		}
		want := QueueEntry{
			JobID: ids[1], RunID: runID, Labels: []string{"linux"}, Status: QueueDispatched, AgentID: "cpu-agent",
			AckDeadline: &ackDeadline, Owner: testOwner,
		}
		if diff := cmp.Diff(want, e, cmpopts.IgnoreFields(QueueEntry{}, "EnqueuedAt", "UpdatedAt")); diff != "" {
			t.Errorf("claimed row (-want +got):\n%s", diff)
		}
	})
}

func TestClaimConcurrentlyNeverTwice(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		const claimers, claimsEach = 2, 50
		labels := make([][]string, claimers*claimsEach)
		for i := range labels {
			labels[i] = []string{"linux"}
		}
		runID, ids := seedJobs(t, db, labels...)
		for _, id := range ids {
			enqueue(t, db, runID, id, []string{"linux"}, nil)
		}

		claimed := make([][]string, claimers)
		var wg sync.WaitGroup
		for c := range claimers {
			wg.Go(func() {
				agent := fmt.Sprintf("agent-%d", c)
				for range claimsEach {
					e, ok, err := db.ClaimForAgent(ctx, testOwner, agent, []string{"linux"}, ackDeadline)
					if err != nil {
						t.Errorf("%s claim: %v", agent, err)
						return
					}
					if ok {
						claimed[c] = append(claimed[c], e.JobID)
					}
				}
			})
		}
		wg.Wait()

		seen := map[string]string{}
		for c, jobs := range claimed {
			agent := fmt.Sprintf("agent-%d", c)
			for _, id := range jobs {
				if other, dup := seen[id]; dup {
					t.Errorf("job %q claimed by %s and %s, want one claimer", id, other, agent)
				}
				seen[id] = agent
				e, err := db.GetQueueEntry(ctx, id)
				if err != nil {
					t.Fatalf("get queue entry: %v", err)
				}
				if e.AgentID != agent || e.Status != QueueDispatched {
					t.Errorf("job %q: got agent %q status %q, want %q %q", id, e.AgentID, e.Status, agent, QueueDispatched)
				}
			}
		}
		// Whatever a claimer may have missed is still claimable.
		for {
			e, ok, err := db.ClaimForAgent(ctx, testOwner, "sweeper", []string{"linux"}, ackDeadline)
			if err != nil {
				t.Fatalf("sweep claim: %v", err)
			}
			if !ok {
				break
			}
			if _, dup := seen[e.JobID]; dup {
				t.Errorf("job %q claimed again by the sweeper", e.JobID)
			}
			seen[e.JobID] = "sweeper"
		}
		if len(seen) != len(ids) {
			t.Errorf("got %d distinct claimed jobs, want %d", len(seen), len(ids))
		}
		t.Logf("claims: agent-0 %d, agent-1 %d, sweeper %d", len(claimed[0]), len(claimed[1]), len(ids)-len(claimed[0])-len(claimed[1]))
	})
}

func TestQueueExpiry(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		runID, ids := seedJobs(t, db, []string{"linux"}, []string{"linux"}, []string{"linux"})
		past, future := testNow.Add(-time.Minute), testNow.Add(time.Hour)
		enqueue(t, db, runID, ids[0], []string{"linux"}, &past)   // expired, and oldest
		enqueue(t, db, runID, ids[1], []string{"linux"}, nil)     // never expires
		enqueue(t, db, runID, ids[2], []string{"linux"}, &future) // expires later

		expired, err := db.ExpiredQueueRows(ctx, testNow)
		if err != nil {
			t.Fatalf("expired rows: %v", err)
		}
		if diff := cmp.Diff([]string{ids[0]}, jobIDs(expired)); diff != "" {
			t.Errorf("expired rows (-want +got):\n%s", diff)
		}
		later, err := db.ExpiredQueueRows(ctx, future)
		if err != nil {
			t.Fatalf("expired rows later: %v", err)
		}
		if diff := cmp.Diff([]string{ids[0], ids[2]}, jobIDs(later)); diff != "" {
			t.Errorf("expired rows an hour later (-want +got):\n%s", diff)
		}

		e, ok, err := db.ClaimForAgent(ctx, testOwner, "agent-1", []string{"linux"}, ackDeadline)
		if err != nil || !ok {
			t.Fatalf("claim: got (%t, %v), want a row", ok, err)
		}
		if e.JobID != ids[1] {
			t.Errorf("claimed %q, want %q (the oldest unexpired row)", e.JobID, ids[1])
		}
		if _, ok, err := db.ClaimJob(ctx, testOwner, ids[0], "agent-2", ackDeadline); err != nil || ok {
			t.Errorf("claim the expired row by ID: got (%t, %v), want (false, nil)", ok, err)
		}
		// A dispatched row is not expired, whatever its expiry.
		if _, ok, err := db.ClaimJob(ctx, testOwner, ids[2], "agent-2", ackDeadline); err != nil || !ok {
			t.Fatalf("claim by ID: got (%t, %v), want (true, nil)", ok, err)
		}
		later, err = db.ExpiredQueueRows(ctx, future)
		if err != nil {
			t.Fatalf("expired rows: %v", err)
		}
		if diff := cmp.Diff([]string{ids[0]}, jobIDs(later)); diff != "" {
			t.Errorf("expired rows after dispatch (-want +got):\n%s", diff)
		}
	})
}

func TestQueueLifecycle(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		runID, ids := seedJobs(t, db, []string{"linux"}, []string{"linux"})
		job, other := ids[0], ids[1]
		enqueue(t, db, runID, job, []string{"linux"}, nil)
		if _, err := db.Enqueue(ctx, NewQueueEntry{JobID: job, RunID: runID}); !errors.Is(err, ErrConflict) {
			t.Errorf("enqueue twice: got %v, want ErrConflict", err)
		}
		if _, err := db.Enqueue(ctx, NewQueueEntry{JobID: "missing", RunID: runID}); err == nil {
			t.Errorf("enqueue a missing job: got no error, want one")
		}

		type result struct {
			Changed bool
			Err     error
		}
		check := func(name string, changed bool, err error, want result) {
			t.Helper()
			if changed != want.Changed || !errors.Is(err, want.Err) {
				t.Errorf("%s: got (%t, %v), want (%t, %v)", name, changed, err, want.Changed, want.Err)
			}
		}

		ok, err := db.SetProvisioningError(ctx, job, "no capacity")
		check("set provisioning error on pending row", ok, err, result{Changed: true})
		ok, err = db.SetProvisioningError(ctx, other, "x")
		check("set provisioning error on missing row", ok, err, result{Err: ErrNotFound})
		if e, _ := db.GetQueueEntry(ctx, job); e.LastProvisioningError != "no capacity" {
			t.Errorf("got provisioning error %q, want %q", e.LastProvisioningError, "no capacity")
		}
		ok, err = db.Ack(ctx, job, "agent-1")
		check("ack a pending row", ok, err, result{})
		_, ok, err = db.Requeue(ctx, RequeueRequest{JobID: job, AgentID: "agent-1", Reason: "x"})
		check("requeue a pending row", ok, err, result{})

		e, ok, err := db.ClaimJob(ctx, testOwner, job, "agent-1", ackDeadline)
		check("claim by ID", ok, err, result{Changed: true})
		if e.LastProvisioningError != "" || e.AgentID != "agent-1" || e.AckDeadline == nil {
			t.Errorf("claimed row: got provisioning error %q, agent %q, ack deadline %v; want cleared, agent-1, set",
				e.LastProvisioningError, e.AgentID, e.AckDeadline)
		}
		_, ok, err = db.ClaimJob(ctx, testOwner, job, "agent-2", ackDeadline)
		check("claim a dispatched row by ID", ok, err, result{})
		_, ok, err = db.ClaimJob(ctx, testOwner, other, "agent-2", ackDeadline)
		check("claim a missing row by ID", ok, err, result{Err: ErrNotFound})
		ok, err = db.SetProvisioningError(ctx, job, "late")
		check("set provisioning error on dispatched row", ok, err, result{})

		expiredAcks, err := db.ExpiredAckDeadlines(ctx, testOwner, ackDeadline)
		if err != nil {
			t.Fatalf("expired acks: %v", err)
		}
		if diff := cmp.Diff([]string{job}, jobIDs(expiredAcks)); diff != "" {
			t.Errorf("expired ack deadlines (-want +got):\n%s", diff)
		}
		if early, _ := db.ExpiredAckDeadlines(ctx, testOwner, ackDeadline.Add(-time.Second)); len(early) != 0 {
			t.Errorf("got %d expired ack deadlines before the deadline, want 0", len(early))
		}
		// An unacked row whose agent went away waits for it: the ack
		// sweep leaves it alone, and the agent's reconnect finds it.
		ok, err = db.SetRecovery(ctx, testOwner, job, "agent-1", testNow.Add(time.Minute))
		check("set recovery of an unacked row", ok, err, result{Changed: true})
		if acks, _ := db.ExpiredAckDeadlines(ctx, testOwner, ackDeadline); len(acks) != 0 {
			t.Errorf("got %d expired ack deadlines for a recovering row, want 0", len(acks))
		}
		mine, err := db.ListRecovering(ctx, "agent-1")
		if err != nil {
			t.Fatalf("list recovering: %v", err)
		}
		if diff := cmp.Diff([]string{job}, jobIDs(mine)); diff != "" {
			t.Errorf("rows recovering for agent-1 (-want +got):\n%s", diff)
		}
		if mine[0].AckDeadline == nil {
			t.Error("recovering unacked row lost its ack deadline")
		}
		if theirs, _ := db.ListRecovering(ctx, "agent-2"); len(theirs) != 0 {
			t.Errorf("got %d rows recovering for agent-2, want 0", len(theirs))
		}
		ok, err = db.Reclaim(ctx, testOwner, job, "agent-1")
		check("clear recovery of an unacked row", ok, err, result{Changed: true})
		_, ok, err = db.Requeue(ctx, RequeueRequest{JobID: job, AgentID: "agent-1", OnlyRecovering: true, Reason: "window over"})
		check("requeue for a recovery window a reconnect settled", ok, err, result{})

		_, ok, err = db.Requeue(ctx, RequeueRequest{JobID: job, AgentID: "agent-2", Reason: "ack timeout"})
		check("requeue a row dispatched to another agent", ok, err, result{})
		e, ok, err = db.Requeue(ctx, RequeueRequest{JobID: job, AgentID: "agent-1", Reason: "ack timeout"})
		check("requeue a dispatched row", ok, err, result{Changed: true})
		want := QueueEntry{JobID: job, RunID: runID, Labels: []string{"linux"}, Status: QueuePending,
			DispatchAttempts: 1, LastRequeueReason: "ack timeout"}
		if diff := cmp.Diff(want, e, cmpopts.IgnoreFields(QueueEntry{}, "EnqueuedAt", "UpdatedAt")); diff != "" {
			t.Errorf("requeued row (-want +got):\n%s", diff)
		}
		_, ok, err = db.Requeue(ctx, RequeueRequest{JobID: job, AgentID: "agent-1", Reason: "again"})
		check("requeue twice", ok, err, result{})

		if _, ok, err := db.ClaimForAgent(ctx, testOwner, "agent-2", []string{"linux"}, ackDeadline); err != nil || !ok {
			t.Fatalf("claim again: got (%t, %v), want a row", ok, err)
		}
		ok, err = db.Ack(ctx, job, "agent-1")
		check("ack from the agent that lost the job", ok, err, result{})
		ok, err = db.Ack(ctx, job, "agent-2")
		check("ack from the agent that has the job", ok, err, result{Changed: true})
		ok, err = db.Ack(ctx, other, "agent-2")
		check("ack a missing row", ok, err, result{Err: ErrNotFound})
		if acks, _ := db.ExpiredAckDeadlines(ctx, testOwner, ackDeadline.Add(time.Hour)); len(acks) != 0 {
			t.Errorf("got %d expired ack deadlines after the ack, want 0", len(acks))
		}
		_, ok, err = db.Requeue(ctx, RequeueRequest{JobID: job, AgentID: "agent-2", OnlyUnacked: true, Reason: "late ack timeout"})
		check("requeue an acknowledged row for a missing ack", ok, err, result{})

		recoverBy := testNow.Add(2 * time.Minute)
		ok, err = db.SetRecovery(ctx, testOwner, job, "agent-1", recoverBy)
		check("set recovery for another agent", ok, err, result{})
		ok, err = db.SetRecovery(ctx, testOwner, job, "agent-2", recoverBy)
		check("set recovery", ok, err, result{Changed: true})
		recovering, err := db.ExpiredRecoveries(ctx, testOwner, recoverBy)
		if err != nil {
			t.Fatalf("expired recoveries: %v", err)
		}
		if diff := cmp.Diff([]string{job}, jobIDs(recovering)); diff != "" {
			t.Errorf("expired recoveries (-want +got):\n%s", diff)
		}
		if early, _ := db.ExpiredRecoveries(ctx, testOwner, testNow); len(early) != 0 {
			t.Errorf("got %d expired recoveries before the deadline, want 0", len(early))
		}
		ok, err = db.Reclaim(ctx, testOwner, job, "agent-1")
		check("clear recovery for another agent", ok, err, result{})
		ok, err = db.Reclaim(ctx, testOwner, job, "agent-2")
		check("clear recovery", ok, err, result{Changed: true})
		if e, _ := db.GetQueueEntry(ctx, job); e.RecoveryAgentID != "" || e.RecoveryDeadline != nil || e.AgentID != "agent-2" {
			t.Errorf("got recovery %q %v and agent %q after reclaim, want none and agent-2", e.RecoveryAgentID, e.RecoveryDeadline, e.AgentID)
		}

		ok, err = db.Dequeue(ctx, job)
		check("dequeue", ok, err, result{Changed: true})
		ok, err = db.Dequeue(ctx, job)
		check("dequeue twice", ok, err, result{})
		if _, err := db.GetQueueEntry(ctx, job); !errors.Is(err, ErrNotFound) {
			t.Errorf("get dequeued row: got %v, want ErrNotFound", err)
		}
	})
}

// TestClaimInTransaction claims and moves the job in one transaction, as
// the dispatcher does, and checks that a failure undoes both.
func TestClaimInTransaction(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run := createTestRun(t, db, testJob("build", []string{"linux"}))
		id := run.Jobs[0].ID
		errSend := errors.New("send failed")
		err := db.Tx(ctx, func(tx *Tx) error {
			e, ok, err := tx.ClaimForAgent(ctx, testOwner, "agent-1", []string{"linux"}, ackDeadline)
			if err != nil || !ok {
				return fmt.Errorf("claim: got (%t, %v), want a row", ok, err)
			}
			if _, err := tx.UpdateJobStatus(ctx, JobTransition{ID: e.JobID, From: []JobStatus{JobQueued}, To: JobDispatched}); err != nil {
				return err
			}
			return errSend
		})
		if !errors.Is(err, errSend) {
			t.Fatalf("tx: got %v, want %v", err, errSend)
		}
		e, err := db.GetQueueEntry(ctx, id)
		if err != nil {
			t.Fatalf("get queue entry: %v", err)
		}
		job, err := db.GetJob(ctx, id)
		if err != nil {
			t.Fatalf("get job: %v", err)
		}
		if e.Status != QueuePending || job.Status != JobQueued {
			t.Errorf("got queue row %q and job %q after rollback, want %q and %q", e.Status, job.Status, QueuePending, JobQueued)
		}
	})
}

func jobIDs(entries []QueueEntry) []string {
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.JobID)
	}
	slices.Sort(ids)
	return ids
}

// TestListQueuePage reads the queue in pages of every size: the pages
// together are the whole queue in ListQueue's order, each row with its
// job's name, including rows that share an enqueue time.
func TestListQueuePage(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		labels := make([][]string, 7)
		for i := range labels {
			labels[i] = []string{"linux"}
		}
		runID, ids := seedJobs(t, db, labels...)
		for _, i := range []int{3, 0, 6, 1, 5, 2, 4} {
			enqueue(t, db, runID, ids[i], []string{"linux"}, nil)
		}
		// Two pairs enqueued at the same instant: job id breaks the tie.
		same := testNow.Add(time.Hour)
		for _, id := range []string{ids[0], ids[6], ids[2], ids[4]} {
			if _, err := db.exec(ctx, "UPDATE dispatch_queue SET enqueued_at = ? WHERE job_id = ?", timeArg(same), id); err != nil {
				t.Fatal(err)
			}
		}
		all, err := db.ListQueue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]string{}
		run, err := db.GetRun(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range run.Jobs {
			names[j.ID] = j.Name
		}
		for _, limit := range []int{1, 2, 3, 7, 100} {
			t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
				var got []QueueEntry
				var after *QueueCursor
				for pages := 0; ; pages++ {
					if pages > len(all) {
						t.Fatalf("more than %d pages", len(all))
					}
					page, err := db.ListQueuePage(ctx, after, limit)
					if err != nil {
						t.Fatal(err)
					}
					if len(page) > limit {
						t.Fatalf("got a page of %d rows, want at most %d", len(page), limit)
					}
					for _, e := range page {
						if e.JobName != names[e.JobID] {
							t.Errorf("job %s: got name %q, want %q", e.JobID, e.JobName, names[e.JobID])
						}
						got = append(got, e.QueueEntry)
					}
					if len(page) < limit {
						break
					}
					last := page[len(page)-1]
					after = &QueueCursor{EnqueuedAt: last.EnqueuedAt, JobID: last.JobID}
				}
				if diff := cmp.Diff(all, got); diff != "" {
					t.Errorf("pages differ from the whole queue (-want +got):\n%s", diff)
				}
			})
		}
		if _, err := db.ListQueuePage(ctx, nil, 0); err == nil {
			t.Errorf("limit 0: got no error, want one")
		}
	})
}
