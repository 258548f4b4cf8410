//go:build unix

package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/agent"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/workflow"
)

// jobDirsOf lists the job directories of jobID under an agent's work dir.
func jobDirsOf(t *testing.T, workDir, jobID string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(workDir, "jobs", "job-"+jobID+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// waitNoJobDirs waits until the work dir holds no job directory (an
// emptied one kept for the next job, "spare-…", does not count; it must be
// empty). Nothing outside the agent signals a removal, so it looks every
// 10 ms.
func waitNoJobDirs(t *testing.T, workDir string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		entries, err := os.ReadDir(filepath.Join(workDir, "jobs"))
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "spare-") {
				checkEmptySpare(t, filepath.Join(workDir, "jobs", e.Name()))
				continue
			}
			left = append(left, e.Name())
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job directories still there 20s after the job ended: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkEmptySpare checks that a kept job directory holds its three empty
// parts and nothing else.
func checkEmptySpare(t *testing.T, dir string) {
	t.Helper()
	for _, part := range []string{"", "src", "scripts", "tmp"} {
		entries, err := os.ReadDir(filepath.Join(dir, part))
		if err != nil {
			t.Errorf("spare %s: %v", dir, err)
			continue
		}
		want := 0
		if part == "" {
			want = 3
		}
		if len(entries) != want {
			t.Errorf("spare %s/%s: got %d entries, want %d", dir, part, len(entries), want)
		}
	}
}

// TestFinalStatusBeforeJobDirRemoval: the final job.status reaches the
// orchestrator while the job's directory still exists (its removal is not
// on the way to the status), and the directory is removed afterwards, once
// the status is acknowledged.
func TestFinalStatusBeforeJobDirRemoval(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	workDir := t.TempDir()
	// dirsAtFinal lists the job's directories when the fake applied the
	// final status, before acknowledging it; copyAtFinal says whether the
	// step's file was still in the checkout then.
	dirsAtFinal, copyAtFinal := map[string][]string{}, map[string]error{}
	f.onApply = func(m protocol.JobScoped) {
		if js, ok := m.(*protocol.JobStatus); ok && js.Status != protocol.JobRunning {
			dirs := jobDirsOf(t, workDir, js.JobID)
			dirsAtFinal[js.JobID] = dirs
			if len(dirs) == 1 {
				_, copyAtFinal[js.JobID] = os.Stat(filepath.Join(dirs[0], "src", "copy"))
			}
		}
	}
	startAgent(t, f, func(c *agent.Config) { c.WorkDir = workDir })
	for _, id := range []string{"d1", "d2"} {
		f.send(dispatch(id, workflow.Step{Run: "cat README > copy; echo done"}))
		if js := finalJob(t, f.jobEnded(id)); js.Status != protocol.JobSuccess {
			t.Fatalf("job %s: got %s %q, want success", id, js.Status, js.Error)
		}
		f.mu.Lock()
		got, copyErr := dirsAtFinal[id], copyAtFinal[id]
		f.mu.Unlock()
		if len(got) != 1 {
			t.Errorf("job %s: directories when the final status arrived: got %v, want the job's one", id, got)
		} else if copyErr != nil {
			t.Errorf("job %s: the checkout when the final status arrived: %v, want the step's file in it", id, copyErr)
		}
		waitNoJobDirs(t, workDir)
	}
}

// TestKeepJobDirs: KICI_AGENT_KEEP_JOB_DIRS still keeps every job's
// directory after the job and after the agent stopped.
func TestKeepJobDirs(t *testing.T) {
	t.Parallel()
	f := newFakeOrchestrator(t)
	workDir := t.TempDir()
	a := startAgent(t, f, func(c *agent.Config) { c.WorkDir, c.KeepJobDirs = workDir, true })
	f.send(dispatch("k1", workflow.Step{Run: "true"}))
	finalJob(t, f.jobEnded("k1"))
	a.cancel()
	if err := a.wait(t); err != nil {
		t.Fatalf("Run: got %v, want nil", err)
	}
	if got := jobDirsOf(t, workDir, "k1"); len(got) != 1 {
		t.Errorf("job directories after the agent stopped: got %v, want the job's one", got)
	}
}

// TestJobDirsRemovedBeforeExit: an agent that exits removes its ended jobs'
// directories first: a one-shot agent after its job, and a stopping agent
// whose orchestrator never acknowledged the final status (the shutdown
// timeout passed).
func TestJobDirsRemovedBeforeExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		oneShot bool
		noAcks  bool
		wantErr string
	}{
		{name: "one-shot", oneShot: true},
		{name: "unacknowledged at shutdown", noAcks: true, wantErr: "unacknowledged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeOrchestrator(t)
			if tc.noAcks {
				f.ackAfterConn = 1 << 30
			}
			workDir := t.TempDir()
			a := startAgent(t, f, func(c *agent.Config) {
				c.WorkDir, c.OneShot = workDir, tc.oneShot
				c.ShutdownTimeout = time.Second
			})
			f.send(dispatch("x1", workflow.Step{Run: "echo hi > file"}))
			finalJob(t, f.jobEnded("x1"))
			if !tc.oneShot {
				a.cancel()
			}
			err := a.wait(t)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Run: got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Run: got %v, want an error naming %q", err, tc.wantErr)
			}
			left, err := os.ReadDir(filepath.Join(workDir, "jobs"))
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Errorf("job directories when Run returned: got %v, want none", left)
			}
		})
	}
}

// TestArchiveFetchFailures: the archive is fetched as the job starts; a
// refused fetch fails the job at once with the same error as before, and a
// 5xx is retried.
func TestArchiveFetchFailures(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		f := newFakeOrchestrator(t)
		startAgent(t, f, nil)
		d := dispatch("f1", workflow.Step{Run: "true"})
		d.JobToken = "" // the fake refuses a request without one
		f.send(d)
		msgs := f.jobEnded("f1")
		url := f.srv.URL + "/archive/src.tar.gz"
		want := fmt.Sprintf("checkout: fetch archive %q: HTTP 401 Unauthorized", url)
		if js := finalJob(t, msgs); js.Status != protocol.JobFailure || js.Error != want {
			t.Errorf("job.status: got %s %q, want failure %q", js.Status, js.Error, want)
		}
		wantLines := []string{"[kici] fetching " + url, "[kici] " + want}
		if diff := cmp.Diff(wantLines, linesOf(msgs, protocol.JobLevelStep)); diff != "" {
			t.Errorf("job-level lines (-want +got):\n%s", diff)
		}
	})
	t.Run("malformed URL", func(t *testing.T) {
		t.Parallel()
		f := newFakeOrchestrator(t)
		startAgent(t, f, nil)
		d := dispatch("f2", workflow.Step{Run: "true"})
		d.Source.ArchiveURL = "http://[::1"
		f.send(d)
		msgs := f.jobEnded("f2")
		js := finalJob(t, msgs)
		if js.Status != protocol.JobFailure || !strings.HasPrefix(js.Error, "checkout: fetch archive: parse ") {
			t.Errorf("job.status: got %s %q, want failure \"checkout: fetch archive: parse …\"", js.Status, js.Error)
		}
		for _, l := range linesOf(msgs, protocol.JobLevelStep) {
			if strings.Contains(l, "retrying") {
				t.Errorf("job-level line %q: a malformed URL was retried", l)
			}
		}
	})
	t.Run("5xx retried", func(t *testing.T) {
		t.Parallel()
		f := newFakeOrchestrator(t)
		f.archiveFailures = 2
		startAgent(t, f, nil)
		f.send(dispatch("f3", workflow.Step{Run: "cat README"}))
		msgs := f.jobEnded("f3")
		if js := finalJob(t, msgs); js.Status != protocol.JobSuccess {
			t.Fatalf("job.status: got %s %q, want success", js.Status, js.Error)
		}
		retries := 0
		for _, l := range linesOf(msgs, protocol.JobLevelStep) {
			if strings.Contains(l, "HTTP 503 Service Unavailable); retrying in ") {
				retries++
			}
		}
		if retries != 2 {
			t.Errorf("retry notes: got %d, want 2 (lines %q)", retries, linesOf(msgs, protocol.JobLevelStep))
		}
		if diff := cmp.Diff([]string{"hello from the archive"}, linesOf(msgs, 0)); diff != "" {
			t.Errorf("step 0 lines (-want +got):\n%s", diff)
		}
	})
}
