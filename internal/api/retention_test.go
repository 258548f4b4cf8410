package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/orchestrator"
)

// TestRunRetention: with a run retention set, a finished run goes, with
// its log files, at the next sweep; a run still queued stays, however old.
func TestRunRetention(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) {
		c.RunRetention = time.Nanosecond // anything that has ended is old enough
		c.RetentionSweepInterval = 20 * time.Millisecond
	}, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "kept", dir, "")
		finished := h.trigger(t, "kept")[0].ID
		queued := h.trigger(t, "kept")[0].ID
		// A log of the finished run, as an agent would have left it.
		logDir := filepath.Join(h.dataDir, "logs", finished)
		if err := os.MkdirAll(logDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(logDir, "marker"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+finished+"/cancel", nil, http.StatusOK, nil)

		// The rows go in one transaction and the log dir right after it
		// commits, so the run may read as gone a moment before its logs are.
		deadline := time.Now().Add(30 * time.Second)
		for h.call(t, adminToken, http.MethodGet, "/api/v1/runs/"+finished, "").status != http.StatusNotFound {
			if time.Now().After(deadline) {
				t.Fatal("the cancelled run was not deleted within 30 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		for {
			_, err := os.Stat(logDir)
			if os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("log dir of the deleted run: stat gives %v 30 s on, want it gone", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := h.call(t, adminToken, http.MethodGet, "/api/v1/runs/"+queued, "").status; got != http.StatusOK {
			t.Errorf("the queued run: GET gives %d, want 200 (never deleted while unfinished)", got)
		}
	})
}
