package firecracker

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// warmLabelSet is a warm-start label set of its own (its own overlay
// size, so no other test's template build is counted).
func warmLabelSet(t testing.TB) scaler.LabelSet {
	ls := testLabelSet(t, t.TempDir())
	ls.Labels = []string{"fc", "linux", "warm"}
	ls.Firecracker.WarmStart = true
	return ls
}

// waitSnapshot waits for the label set's build in progress (or the next
// one) to end and returns the snapshot, failing the test when the build
// failed.
func waitSnapshot(t testing.TB, b *Backend, ls scaler.LabelSet) *snapshot {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		b.warm.mu.Lock()
		ws := b.warm.set(ls.Key())
		snap, building, lastErr, built := ws.snap, ws.building, ws.lastErr, ws.built
		b.warm.mu.Unlock()
		switch {
		case snap != nil && !building:
			return snap
		case !building && lastErr != "":
			t.Fatalf("the snapshot build failed: %s", lastErr)
		case !building:
			t.Fatal("no snapshot and no build in progress")
		}
		select {
		case <-built:
		case <-deadline:
			t.Fatal("the snapshot build did not end within 60 s")
		}
	}
}

// events collects a spawn's events.
type events struct {
	mu  sync.Mutex
	got []scaler.Event
}

func (e *events) add(ev scaler.Event) { e.mu.Lock(); e.got = append(e.got, ev); e.mu.Unlock() }

func (e *events) has(typ, detail string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.got, func(ev scaler.Event) bool { return ev.Type == typ && strings.Contains(ev.Detail, detail) })
}

// spawnWatched spawns req recording its events.
func spawnWatched(t *testing.T, b *Backend, req scaler.SpawnRequest) (*events, error) {
	ev := &events{}
	inner := req.OnEvent
	req.OnEvent = func(e scaler.Event) {
		ev.add(e)
		if inner != nil {
			inner(e)
		}
	}
	_, err := b.Spawn(t.Context(), req)
	return ev, err
}

// TestWarmStartRestoresFromSnapshot: a warm-start label set's snapshot is
// built from a template VM that leaves nothing behind; two spawns at once
// restore it, each on its own TAP and address (the template's address
// has no rule: a guest still on it would reach nothing), and their agents
// register; afterwards only the snapshot is left.
func TestWarmStartRestoresFromSnapshot(t *testing.T) {
	w := testWorld(t)
	dir := t.TempDir()
	b := w.newBackend(t, dir)
	defer b.Close(context.Background())
	ls := warmLabelSet(t)
	orch := w.orchestrator(t)

	b.Prewarm([]scaler.LabelSet{ls})
	snap := waitSnapshot(t, b, ls)
	for _, n := range []string{snapStateName, snapMemName, overlayName, warmMetaName} {
		if _, err := os.Stat(filepath.Join(snap.dir, n)); err != nil {
			t.Errorf("snapshot file: %v", err)
		}
	}
	if fi, err := os.Stat(filepath.Join(snap.dir, snapMemName)); err == nil && fi.Mode().Perm() != 0o440 {
		t.Errorf("memory file mode %v, want 0440: a VMM must not be able to change what later restores load", fi.Mode().Perm())
	}
	if left := w.leftovers(t, dir, snap.meta.TemplateID); len(left) != 0 {
		t.Errorf("the template VM left %q", left)
	}
	checks := b.HostChecks([]scaler.LabelSet{ls})
	if i := slices.IndexFunc(checks, func(c scaler.HostCheck) bool { return c.Name == "warm-start fc,linux,warm" }); i < 0 ||
		checks[i].Status != "pass" || !strings.Contains(checks[i].Detail, "snapshot ready") {
		t.Errorf("host checks lack a passing warm-start row: %+v", checks)
	}

	var wg sync.WaitGroup
	reqs := []scaler.SpawnRequest{orch.Request(b, ls), orch.Request(b, ls)}
	evs := make([]*events, len(reqs))
	errs := make([]error, len(reqs))
	for i, req := range reqs {
		wg.Go(func() { evs[i], errs[i] = spawnWatched(t, b, req) })
	}
	wg.Wait()
	for i, req := range reqs {
		if errs[i] != nil {
			t.Fatalf("spawn %s: %v", req.AgentID, errs[i])
		}
		if !evs[i].has(scaler.EventReady, "restored from snapshot") {
			t.Errorf("spawn %s was not a restore: %+v", req.AgentID, evs[i].got)
		}
		orch.WaitRegistered(t, req.AgentID)
		b.MarkRegistered(req.AgentID)
		// The agent dialled from the restore's own address, not the
		// template's, which every restore's kernel booted with.
		b.mu.Lock()
		own := b.vms[req.AgentID].addr.String()
		b.mu.Unlock()
		if host, _, _ := net.SplitHostPort(orch.RemoteAddr(req.AgentID)); host != own {
			t.Errorf("agent %s dialled from %s, want its own address %s", req.AgentID, host, own)
		}
	}
	for _, req := range reqs {
		if err := b.Destroy(t.Context(), req.AgentID); err != nil {
			t.Fatal(err)
		}
		if left := w.leftovers(t, dir, req.AgentID); len(left) != 0 {
			t.Errorf("%s left %q", req.AgentID, left)
		}
	}
	if _, err := readSnapshot(snap.dir); err != nil {
		t.Errorf("the snapshot did not outlive its restores: %v", err)
	}
}

// TestWarmStartCorruptSnapshotIsDropped: a restore of a snapshot that no
// longer loads fails that spawn, drops the snapshot, and the next spawn
// boots cold while a new snapshot is built.
func TestWarmStartCorruptSnapshotIsDropped(t *testing.T) {
	w := testWorld(t)
	dir := t.TempDir()
	b := w.newBackend(t, dir)
	defer b.Close(context.Background())
	ls := warmLabelSet(t)
	orch := w.orchestrator(t)
	b.Prewarm([]scaler.LabelSet{ls})
	snap := waitSnapshot(t, b, ls)
	if err := os.WriteFile(filepath.Join(snap.dir, snapStateName), []byte("not a snapshot"), 0o440); err != nil {
		t.Fatal(err)
	}

	req := orch.Request(b, ls)
	if _, err := spawnWatched(t, b, req); err == nil || !strings.Contains(err.Error(), "restore the snapshot") {
		t.Fatalf("spawn from a corrupt snapshot: %v, want a restore error", err)
	}
	if left := w.leftovers(t, dir, req.AgentID); len(left) != 0 {
		t.Errorf("the failed restore left %q", left)
	}
	if _, err := os.Stat(snap.dir); !os.IsNotExist(err) {
		t.Errorf("the corrupt snapshot is still there: %v", err)
	}
	for _, c := range b.HostChecks([]scaler.LabelSet{ls}) {
		if c.Name == "warm-start fc,linux,warm" && c.Status != "warn" {
			t.Errorf("warm-start row after the drop: %+v, want a warning", c)
		}
	}

	req = orch.Request(b, ls)
	ev, err := spawnWatched(t, b, req)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.has(scaler.EventReady, "booted") {
		t.Errorf("the spawn after the drop did not boot cold: %+v", ev.got)
	}
	orch.WaitRegistered(t, req.AgentID)
	if err := b.Destroy(t.Context(), req.AgentID); err != nil {
		t.Fatal(err)
	}
	if fresh := waitSnapshot(t, b, ls); fresh.meta.TemplateID == snap.meta.TemplateID {
		t.Errorf("no new snapshot was built")
	}
}

// TestWarmStartSnapshotOutlivesTheProcess: a backend started on a chroot
// base that holds a snapshot of the same files restores it without
// building one; a job asking for another size boots cold.
func TestWarmStartSnapshotOutlivesTheProcess(t *testing.T) {
	w := testWorld(t)
	dir := t.TempDir()
	ls := warmLabelSet(t)
	first := w.newBackend(t, dir)
	first.Prewarm([]scaler.LabelSet{ls})
	snap := waitSnapshot(t, first, ls)
	if err := first.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	b, err := New(nil, first.cfg) // the same kernel and base: a restart
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	orch := w.orchestrator(t)
	req := orch.Request(b, ls)
	ev, err := spawnWatched(t, b, req)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.has(scaler.EventReady, "restored from snapshot") {
		t.Errorf("the restarted backend did not restore the snapshot on disk: %+v", ev.got)
	}
	b.warm.mu.Lock()
	ws := b.warm.set(ls.Key())
	if ws.building || ws.snap == nil || ws.snap.meta.TemplateID != snap.meta.TemplateID {
		t.Errorf("warm state after the restart: building %v, snapshot %+v; want the one on disk", ws.building, ws.snap)
	}
	b.warm.mu.Unlock()
	orch.WaitRegistered(t, req.AgentID)

	big := orch.Request(b, ls)
	big.Limits = scaler.Spec{CPUs: 3}
	ev, err = spawnWatched(t, b, big)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.has(scaler.EventReady, "booted") {
		t.Errorf("a job with its own size was restored from the label set's snapshot: %+v", ev.got)
	}
	orch.WaitRegistered(t, big.AgentID)
	for _, id := range []string{req.AgentID, big.AgentID} {
		if err := b.Destroy(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
}
