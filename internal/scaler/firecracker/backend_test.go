package firecracker

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/overlay"
)

// TestConcurrentFirstSpawnsShareOneTemplateBuild: 8 spawns at once on a
// fresh chroot base run mkfs once between them; a template corrupted
// afterwards is rebuilt by the next spawn.
func TestConcurrentFirstSpawnsShareOneTemplateBuild(t *testing.T) {
	w := testWorld(t)
	dir := t.TempDir()
	b := w.newBackend(t, dir)
	defer b.Close(context.Background())
	ls := testLabelSet(t, t.TempDir())
	ls.Firecracker.OverlayDriveSizeMib = 24 // a size no other test uses
	orch := w.orchestrator(t)
	spawnAll := func(n int) {
		var wg sync.WaitGroup
		errs := make([]error, n)
		ids := make([]string, n)
		for i := range n {
			req := orch.Request(b, ls)
			ids[i] = req.AgentID
			wg.Go(func() { _, errs[i] = b.Spawn(t.Context(), req) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("spawn %d: %v", i, err)
			}
		}
		for _, id := range ids {
			orch.WaitRegistered(t, id)
			if err := b.Destroy(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}
	}
	spawnAll(8)
	tpl, err := w.host.Templates(filepath.Join(dir, "jail"))
	if err != nil {
		t.Fatal(err)
	}
	if n := tpl.Builds(); n != 1 {
		t.Fatalf("8 concurrent first spawns ran mkfs %d times, want 1", n)
	}
	path := overlay.TemplatePath(overlay.TemplateDir(filepath.Join(dir, "jail")), 24)
	// Zero the ext4 magic: the template is no longer valid.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0, 0}, 1024+0x38); err != nil {
		t.Fatal(err)
	}
	f.Close()
	spawnAll(1)
	if n := tpl.Builds(); n != 2 {
		t.Fatalf("after corrupting the template: %d builds, want 2 (one rebuild)", n)
	}
	if !overlay.Valid(path, 24) {
		t.Error("the rebuilt template is not valid")
	}
}

// TestStopOrphanOutcomes: an operator's stop of one VM id answers what
// happened, and kills only an untracked VM whose identity is confirmed.
func TestStopOrphanOutcomes(t *testing.T) {
	w := testWorld(t)
	dir := t.TempDir()
	b := w.newBackend(t, dir)
	defer b.Close(context.Background())
	ls := testLabelSet(t, t.TempDir())
	orch := w.orchestrator(t)
	spawn := func() string {
		req := orch.Request(b, ls)
		if _, err := b.Spawn(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		orch.WaitRegistered(t, req.AgentID)
		return req.AgentID
	}
	tracked := spawn()
	orphan := spawn()
	// Forget orphan as a crashed orchestrator would have: its VM still
	// runs, nothing tracks it.
	b.mu.Lock()
	delete(b.vms, orphan)
	b.mu.Unlock()
	w.host.untrack(orphan)
	// A dir whose VMM is gone.
	dead := "scaler-firecracker-0dead0ff"
	if err := os.MkdirAll(filepath.Join(dir, "jail", "firecracker", dead, "root"), 0o750); err != nil {
		t.Fatal(err)
	}
	none := func(string) bool { return false }
	for _, tc := range []struct {
		id, want string
		tracker  func(string) bool
	}{
		{tracked, scaler.OutcomeTracked, none},
		{orphan, scaler.OutcomeTracked, func(id string) bool { return id == orphan }}, // the caller's tracker wins
		{"scaler-firecracker-00000000", scaler.OutcomeNotFound, none},
		{dead, scaler.OutcomeNotLive, none},
		{"..", scaler.OutcomeNotFound, none},
		{"a/b", scaler.OutcomeNotFound, none},
		{orphan, scaler.OutcomeStopped, none},
	} {
		got, _ := b.StopOrphan(t.Context(), tc.id, tc.tracker)
		if got != tc.want {
			t.Errorf("stop %q: got %q, want %q", tc.id, got, tc.want)
		}
	}
	if left := w.leftovers(t, dir, orphan); len(left) != 0 {
		t.Errorf("the stopped orphan left %q", left)
	}
	list, err := b.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].AgentID != tracked || list[0].Unverified || !list[0].Tracked {
		t.Errorf("listing after the stop: %+v, want only the tracked VM, confirmed and tracked by the backend", list)
	}
}
