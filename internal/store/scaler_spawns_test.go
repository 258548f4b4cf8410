package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScalerSpawnsRoundTrip(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		a := ScalerSpawn{AgentID: "scaler-bare-metal-1", Scaler: "metal", JobID: "j", RunID: "r", LabelKey: "linux", Handle: "eyJ2IjoxfQ=="}
		if err := db.SaveScalerSpawn(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Registered = true
		if err := db.SaveScalerSpawn(ctx, a); err != nil {
			t.Fatal(err)
		}
		// A late write from a stale read (no handle yet, not registered
		// yet) loses neither the handle nor the registration.
		if err := db.SaveScalerSpawn(ctx, ScalerSpawn{AgentID: a.AgentID, Scaler: a.Scaler, JobID: a.JobID, RunID: a.RunID, LabelKey: a.LabelKey}); err != nil {
			t.Fatal(err)
		}
		if err := db.SaveScalerSpawn(ctx, ScalerSpawn{AgentID: "scaler-container-2", Scaler: "boxes"}); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteScalerSpawn(ctx, "scaler-container-2"); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteScalerSpawn(ctx, "never-there"); err != nil {
			t.Errorf("deleting a missing record: %v, want nil", err)
		}
		got, err := db.ListScalerSpawns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("got %d records, want 1", len(got))
		}
		got[0].CreatedAt = a.CreatedAt
		if diff := cmp.Diff(a, got[0]); diff != "" {
			t.Errorf("record (-want +got):\n%s", diff)
		}
	})
}
