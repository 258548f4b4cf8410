package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestAgentDrains(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		if got, err := db.ListAgentDrains(ctx); err != nil || len(got) != 0 {
			t.Fatalf("list before any drain: got (%v, %v), want none", got, err)
		}
		b, err := db.PutAgentDrain(ctx, AgentDrain{AgentID: "host-b", Reason: "disk swap", DrainedBy: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if b.DrainedAt.Before(testNow) || b.DrainedAt.After(testNow.Add(time.Second)) {
			t.Errorf("drained at %v, want the store's clock (%v)", b.DrainedAt, testNow)
		}
		if _, err := db.PutAgentDrain(ctx, AgentDrain{AgentID: "host-a"}); err != nil {
			t.Fatal(err)
		}
		// Draining again replaces the reason and author.
		if _, err := db.PutAgentDrain(ctx, AgentDrain{AgentID: "host-b", Reason: "kernel update", DrainedBy: "bob"}); err != nil {
			t.Fatal(err)
		}
		got, err := db.ListAgentDrains(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []AgentDrain{
			{AgentID: "host-a"},
			{AgentID: "host-b", Reason: "kernel update", DrainedBy: "bob"},
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(AgentDrain{}, "DrainedAt")); diff != "" {
			t.Errorf("drains (-want +got):\n%s", diff)
		}
		if err := db.DeleteAgentDrain(ctx, "host-a"); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteAgentDrain(ctx, "host-a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("undrain twice: got %v, want ErrNotFound", err)
		}
		if got, _ := db.ListAgentDrains(ctx); len(got) != 1 || got[0].AgentID != "host-b" {
			t.Errorf("after undrain: got %v, want host-b only", got)
		}
	})
}
