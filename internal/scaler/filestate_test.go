package scaler

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFileStateKeepsRecordsAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "spawns.json")
	a := NewFileState(path)
	if err := a.SaveSpawn(ctx, SpawnRecord{AgentID: "scaler-b-1", Scaler: "metal", JobID: "j1", Handle: Handle{AgentID: "scaler-b-1", Blob: []byte(`{"pid":7}`)}}); err != nil {
		t.Fatal(err)
	}
	// A save without a handle (registration) keeps the stored handle.
	if err := a.SaveSpawn(ctx, SpawnRecord{AgentID: "scaler-b-1", Scaler: "metal", JobID: "j1", Registered: true}); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveSpawn(ctx, SpawnRecord{AgentID: "scaler-b-0", Scaler: "metal"}); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteSpawn(ctx, "scaler-b-0"); err != nil {
		t.Fatal(err)
	}
	got, err := NewFileState(path).ListSpawns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].AgentID != "scaler-b-1" || !got[0].Registered || string(got[0].Handle.Blob) != `{"pid":7}` {
		t.Fatalf("records read back: got %+v, want scaler-b-1 registered with its handle", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode: got %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

func TestFileStateRefusesACorruptFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "spawns.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFileState(path).ListSpawns(t.Context()); err == nil {
		t.Fatal("ListSpawns of a corrupt file: got nil error, want one naming the file")
	}
}
