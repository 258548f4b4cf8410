package e2e

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/testsvc"
)

// secondEnv is the environment of a second orchestrator beside o: o's own,
// on a fresh listen address, and on dataDir.
func secondEnv(t *testing.T, o *orchestrator, dataDir string) []string {
	t.Helper()
	addr := freeAddr(t)
	return append(append([]string{}, o.env...),
		"KICI_HTTP_ADDR="+addr, "KICI_PUBLIC_URL=http://"+addr, "KICI_DATA_DIR="+dataDir)
}

// runToExit runs `kici-orchestrator serve` with env and waits up to
// timeout for it to exit, returning its exit code and output. It fails the
// test if the process is still running then (it started, which it must
// not).
func runToExit(t *testing.T, env []string, timeout time.Duration) (int, string) {
	t.Helper()
	var out syncBuffer
	cmd := exec.Command(filepath.Join(binDir, "kici-orchestrator"), "serve")
	cmd.Env = append(minimalEnv(), env...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Logf("second orchestrator output:\n%s", out.String())
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), out.String()
		}
		if err != nil {
			t.Fatalf("wait for the second orchestrator: %v", err)
		}
		return 0, out.String()
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("second orchestrator still running after %s, want it to exit at once; output:\n%s", timeout, out.String())
		return 0, ""
	}
}

// liveName is how the refusal names the live orchestrator o.
func liveName(t *testing.T, o *orchestrator) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("is in use by kici-orchestrator pid %d on host %s, listening on %s, since ", o.cmd.Process.Pid, host, o.addr)
}

// TestSecondOrchestratorRefused: a second orchestrator started on the data
// dir (SQLite) or the database (PostgreSQL, with a data dir of its own) of
// a live one that runs a job exits non-zero at once, naming the live one,
// and the live one's job runs on to success, once.
func TestSecondOrchestratorRefused(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		a := startOrchestrator(t, dbURL)
		marks := t.TempDir()
		a.addRepo(t, map[string]string{"ci.yml": matrixWorkflow(marks, 1, 1)})
		startAgent(t, a, "", "solo", nil)
		id := a.push(t)
		waitFor(t, 30*time.Second, "the job to start", func() bool {
			return fileExists(filepath.Join(marks, "started-0-0"))
		})

		dataDir, want := a.dataDir, fmt.Sprintf("data dir %q ", a.dataDir)+liveName(t, a)
		if dbURL != "" {
			dataDir, want = t.TempDir(), "database "+liveName(t, a)
		}
		code, out := runToExit(t, secondEnv(t, a, dataDir), 30*time.Second)
		if code == 0 {
			t.Errorf("second orchestrator: got exit code 0, want non-zero")
		}
		if !strings.Contains(out, want) {
			t.Errorf("second orchestrator said:\n%s\nwant it to contain %q", out, want)
		}

		if err := touch(filepath.Join(marks, "go")); err != nil {
			t.Fatal(err)
		}
		r := a.waitRun(t, id, 60*time.Second, "run to end", ended)
		if r.Status != "success" || len(r.Jobs) != 1 || r.Jobs[0].Status != "success" {
			t.Errorf("run: got %s, jobs %+v, want success with its one job successful", r.Status, r.Jobs)
		}
		assertRanOnce(t, marks, 1, 1)
	})
}

// TestOrchestratorRestartAfterKill: SIGKILL leaves no lock behind, so an
// orchestrator restarted on the same data dir starts at once, on SQLite
// and on PostgreSQL (where the dead one's row is still fresh: it is
// recognised through the lock file). Another data dir on the same
// PostgreSQL database is refused while that row is fresh.
func TestOrchestratorRestartAfterKill(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		// A heartbeat of a minute: the killed one's row stays live for
		// five, longer than this test.
		a := startOrchestrator(t, dbURL, "KICI_INSTANCE_HEARTBEAT_MS=60000")
		dead := liveName(t, a)
		a.kill()
		if dbURL != "" {
			code, out := runToExit(t, secondEnv(t, a, t.TempDir()), 30*time.Second)
			if want := "database " + dead; code == 0 || !strings.Contains(out, want) {
				t.Errorf("orchestrator on another data dir: got exit code %d, output:\n%s\nwant non-zero, naming %q", code, out, want)
			}
		}
		a.start() // fails the test unless it becomes ready
		var list struct{ Runs []any }
		a.api(t, "GET", "/api/v1/runs", nil, &list, http.StatusOK)
	})
}

// TestPostgresInstanceFreedByShutdownOrStaleness: on PostgreSQL, a second
// orchestrator (its own data dir) starts once the first one has stopped
// cleanly (its row is removed), or once a killed one's heartbeat is stale.
func TestPostgresInstanceFreedByShutdownOrStaleness(t *testing.T) {
	t.Parallel()
	t.Run("clean shutdown", func(t *testing.T) {
		t.Parallel()
		// With a heartbeat of a minute the row would stay live for five:
		// only its removal lets the second one in.
		a := startOrchestrator(t, testsvc.PostgresURL(t), "KICI_INSTANCE_HEARTBEAT_MS=60000")
		a.stop()
		b := beside(t, a)
		if !b.tryStart() {
			t.Fatalf("second orchestrator refused after the first stopped cleanly:\n%s", b.output.String())
		}
	})
	t.Run("stale heartbeat", func(t *testing.T) {
		t.Parallel()
		a := startOrchestrator(t, testsvc.PostgresURL(t), "KICI_INSTANCE_HEARTBEAT_MS=200")
		a.kill()
		// The killed one's row is live for a second after its last
		// heartbeat: a start within it is refused, one after it starts.
		b := beside(t, a)
		deadline := time.Now().Add(60 * time.Second)
		for !b.tryStart() {
			if !strings.Contains(b.output.String(), "database is in use by kici-orchestrator pid") {
				t.Fatalf("second orchestrator exited, but not for the stale instance:\n%s", b.output.String())
			}
			if time.Now().After(deadline) {
				t.Fatalf("second orchestrator still refused 60 s after the first was killed:\n%s", b.output.String())
			}
			time.Sleep(100 * time.Millisecond) // polling the row's expiry: no signal to await
		}
	})
}

// beside is an orchestrator like o (its database and settings) on a data
// dir and listen address of its own, not started.
func beside(t *testing.T, o *orchestrator) *orchestrator {
	t.Helper()
	b := &orchestrator{t: t, dataDir: t.TempDir(), dbURL: o.dbURL, token: o.token}
	b.env = secondEnv(t, o, b.dataDir)
	for _, kv := range b.env {
		if v, ok := strings.CutPrefix(kv, "KICI_HTTP_ADDR="); ok {
			b.addr = v
		}
	}
	return b
}

// tryStart starts o and reports whether it became ready; false when it
// exited first (its output says why).
func (o *orchestrator) tryStart() bool {
	t := o.t
	t.Helper()
	o.cmd = exec.Command(filepath.Join(binDir, "kici-orchestrator"), "serve")
	o.cmd.Env = append(minimalEnv(), o.env...)
	o.cmd.Stdout = io.MultiWriter(&testWriter{t: t, prefix: "orchestrator: "}, &o.output)
	o.cmd.Stderr = o.cmd.Stdout
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(o.cmd, o.done)
	t.Cleanup(o.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-o.done:
			return false
		default:
		}
		if resp, err := http.Get("http://" + o.addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("orchestrator neither ready nor exited after 30 s")
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// walkModes returns each entry under dir whose mode has group or other
// bits, with its mode.
func walkModes(t *testing.T, dir string) (loose []string, n int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o077 != 0 {
			rel, _ := filepath.Rel(dir, path)
			loose = append(loose, fmt.Sprintf("%s %s", fi.Mode(), rel))
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return loose, n
}

// TestDataFilesOwnerOnly: after a run, nothing the orchestrator keeps in
// its data dir (the database and its -wal and -shm, logs, keys, the lock
// file, the archive cache) is readable by its group or by others, and an
// old install's world-readable files are tightened at start.
func TestDataFilesOwnerOnly(t *testing.T) {
	t.Parallel()
	// No KICI_SECRET_KEY: the key is generated into the data dir.
	o := startOrchestrator(t, "", "KICI_SECRET_KEY=")
	o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  hello:
    steps:
      - run: echo one; echo two
`})
	startAgent(t, o, "", "modes", nil)
	id := o.push(t)
	if r := o.waitRun(t, id, 60*time.Second, "run to end", ended); r.Status != "success" {
		t.Fatalf("run: got %s (%s), want success", r.Status, r.Error)
	}
	for _, f := range []string{"kici.db", "kici.db-wal", "kici.db-shm", "secret.key", "job-token.key", "orchestrator.lock", "logs", "archive-cache"} {
		if !fileExists(filepath.Join(o.dataDir, f)) {
			t.Errorf("data dir has no %s, want one (the test checks its mode)", f)
		}
	}
	loose, n := walkModes(t, o.dataDir)
	if len(loose) > 0 {
		t.Errorf("data dir entries readable by group or others (of %d):\n%s", n, strings.Join(loose, "\n"))
	}

	// An older kici left the files 0644 and the directories 0755.
	o.stop()
	err := filepath.WalkDir(o.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	o.start()
	if loose, n := walkModes(t, o.dataDir); len(loose) > 0 {
		t.Errorf("after a restart, data dir entries readable by group or others (of %d):\n%s", n, strings.Join(loose, "\n"))
	}
}
