package store

import (
	"testing"
)

func TestBindAgent(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		bind := func(id, cred string) (string, bool) {
			t.Helper()
			var holder string
			var ok bool
			if err := db.Tx(ctx, func(tx *Tx) error {
				var err error
				holder, ok, err = tx.BindAgent(ctx, id, cred)
				return err
			}); err != nil {
				t.Fatalf("bind %q to %q: %v", id, cred, err)
			}
			return holder, ok
		}
		if holder, ok := bind("host-1", "token:a"); !ok || holder != "token:a" {
			t.Fatalf("first bind: got (%q, %v), want (token:a, true)", holder, ok)
		}
		// Nothing held: another credential may take the id over.
		if holder, ok := bind("host-1", "token:b"); !ok || holder != "token:b" {
			t.Fatalf("rebind of an idle id: got (%q, %v), want (token:b, true)", holder, ok)
		}
		runID, ids := seedJobs(t, db, []string{"linux"})
		enqueue(t, db, runID, ids[0], []string{"linux"}, nil)
		if _, ok, err := db.ClaimForAgent(ctx, testOwner, "host-1", []string{"linux"}, ackDeadline); err != nil || !ok {
			t.Fatalf("claim: (%v, %v)", ok, err)
		}
		if holder, ok := bind("host-1", "token:a"); ok || holder != "token:b" {
			t.Fatalf("bind while the id holds a job: got (%q, %v), want (token:b, false)", holder, ok)
		}
		if holder, ok := bind("host-1", "token:b"); !ok || holder != "token:b" {
			t.Fatalf("same credential again: got (%q, %v), want (token:b, true)", holder, ok)
		}
		// Waiting for the agent to come back counts as holding the job.
		if _, err := db.SetRecovery(ctx, testOwner, ids[0], "host-1", testNow.Add(60_000_000_000)); err != nil {
			t.Fatal(err)
		}
		if _, ok := bind("host-1", "token:a"); ok {
			t.Fatalf("bind while a job waits for the agent: got true, want false")
		}
		if _, err := db.Dequeue(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
		if holder, ok := bind("host-1", "token:a"); !ok || holder != "token:a" {
			t.Fatalf("bind after the job left: got (%q, %v), want (token:a, true)", holder, ok)
		}
	})
}
