//go:build unix

package baremetal

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// TestSpawnCancelledAfterStart: a ctx that ends once the process runs gets
// the process killed and its files removed.
func TestSpawnCancelledAfterStart(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := New(slog.New(slog.NewTextHandler(t.Output(), nil)), Config{Name: "test", WorkDir: dir, KillGrace: 5 * time.Second})
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx, cancel := context.WithCancel(t.Context())
	var pid int
	b.afterStart = func() {
		pid = b.lookup("scaler-bare-metal-cancelled").pid
		cancel()
	}
	req := scaler.SpawnRequest{
		AgentID:  "scaler-bare-metal-cancelled",
		LabelSet: scaler.LabelSet{BinaryPath: self, Env: map[string]string{"BAREMETAL_TEST_CHILD": "sleep"}},
		OnEvent: func(ev scaler.Event) {
			if ev.Type == scaler.EventFailed {
				t.Errorf("got %s %q, want none", ev.Type, ev.Detail)
			}
		},
	}
	start := time.Now()
	_, err = b.Spawn(ctx, req)
	if err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("Spawn: got %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Spawn took %s to unwind, want it to skip the kill grace", took)
	}
	if b.lookup(req.AgentID) != nil {
		t.Errorf("agent %s still tracked", req.AgentID)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after a cancelled spawn: got kill(0) error %v, want ESRCH", pid, err)
	}
	for _, p := range []string{filepath.Join(dir, "agents", req.AgentID), filepath.Join(dir, "logs", req.AgentID+".log")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after a cancelled spawn: got stat error %v, want it absent", p, err)
		}
	}
}
