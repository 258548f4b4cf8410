//go:build unix

package orchestrator

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testConfig(dataDir string) Config {
	return Config{
		HTTPAddr: "127.0.0.1:0", PublicURL: "http://127.0.0.1:4000", DataDir: dataDir, AgentAuth: "token",
		QueueSweepInterval: time.Hour, DispatchAckTimeout: time.Minute, AgentRecoveryWindow: time.Minute,
	}
}

// TestDataDirLocked: while one orchestrator holds a data dir, a second
// New on it fails before opening the database, naming the first; once the
// first closes, the data dir is free.
func TestDataDirLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	first, err := New(t.Context(), log, testConfig(dir))
	if err != nil {
		t.Fatalf("first orchestrator: %v", err)
	}
	t.Cleanup(func() { _ = first.Close() })

	// The second one would otherwise make the database file: take it
	// away to see that the second one never opens the database.
	db := filepath.Join(dir, "kici.db")
	if err := os.Rename(db, db+".moved"); err != nil {
		t.Fatal(err)
	}
	_, err = New(t.Context(), log, testConfig(dir))
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("second orchestrator: got %v, want a DataDirInUseError", err)
	}
	host, _ := os.Hostname()
	if inUse.Holder.PID != os.Getpid() || inUse.Holder.Hostname != host || inUse.Holder.Addr != "127.0.0.1:0" {
		t.Errorf("holder: got %+v, want pid %d on %s listening on 127.0.0.1:0", inUse.Holder, os.Getpid(), host)
	}
	if want := `data dir "` + dir + `" is in use by kici-orchestrator pid `; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if fileExists(db) {
		t.Errorf("the refused orchestrator created %s", db)
	}
	if err := os.Rename(db+".moved", db); err != nil {
		t.Fatal(err)
	}

	if err := first.Close(); err != nil {
		t.Fatalf("close first: %v", err)
	}
	again, err := New(t.Context(), log, testConfig(dir))
	if err != nil {
		t.Fatalf("orchestrator after the first closed: %v", err)
	}
	_ = again.Close()
}

// TestMigrateRefusedBesideLiveOrchestrator: `kici-orchestrator migrate`
// does not change a SQLite schema under a live orchestrator. (Not
// parallel: it sets the environment Main reads.)
func TestMigrateRefusedBesideLiveOrchestrator(t *testing.T) {
	dir := t.TempDir()
	srv, err := New(t.Context(), slog.New(slog.NewTextHandler(t.Output(), nil)), testConfig(dir))
	if err != nil {
		t.Fatalf("orchestrator: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("KICI_DATA_DIR", dir)
	t.Setenv("KICI_HTTP_ADDR", "127.0.0.1:0")
	var stdout, stderr strings.Builder
	code := Main([]string{"migrate"}, &stdout, &stderr)
	if want := "is in use by kici-orchestrator pid "; code == 0 || !strings.Contains(stderr.String(), want) {
		t.Errorf("migrate: got exit %d, stderr %q; want non-zero and %q", code, stderr.String(), want)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
