package api_test

import (
	"bytes"
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/orchestrator"
)

// TestArchiveIsCached: the agents of a run download the archive of one
// commit again and again; the second download comes from the archive
// cache, not from git (the repository is gone by then), byte for byte the
// same, and the cache holds one entry.
func TestArchiveIsCached(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) { c.ArchiveCacheEntries = 4 }, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "cached", dir, "")
		header := jobTokenHeader(t, h, h.trigger(t, "cached")[0].ID)
		download := func() []byte {
			t.Helper()
			resp := h.do(t, http.MethodGet, "/api/v1/sources/cached/archive/"+sha, header, nil)
			if resp.status != http.StatusOK || !bytes.HasPrefix(resp.body, []byte{0x1f, 0x8b}) {
				t.Fatalf("download: got status %d and %d bytes, want 200 and a gzip body", resp.status, len(resp.body))
			}
			return resp.body
		}
		first := download()
		if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
			t.Fatal(err)
		}
		if second := download(); !bytes.Equal(first, second) {
			t.Fatalf("second download: %d bytes differing from the first's %d", len(second), len(first))
		}
		entries, err := filepath.Glob(filepath.Join(h.dataDir, "archive-cache", "*.tar.gz"))
		if err != nil || len(entries) != 1 {
			t.Fatalf("cache entries: got %v (%v), want one", entries, err)
		}
	})
}

// TestArchiveStoreErrorIsNot403: when the job-token check cannot read the
// job (here its table is gone; in the field, a dropped database
// connection), the answer is a 5xx that the agent retries, never a 403,
// which would fail the job for a fault of the orchestrator's.
func TestArchiveStoreErrorIsNot403(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "broken", dir, "")
		header := jobTokenHeader(t, h, h.trigger(t, "broken")[0].ID)
		// The orchestrator may still be writing (the run's dispatch is sent
		// after the trigger's answer): wait for its lock like any client.
		driver, dsn := "sqlite", "file:"+filepath.Join(h.dataDir, "kici.db")+"?_pragma=busy_timeout(10000)"
		if h.dbURL != "" {
			driver, dsn = "pgx", h.dbURL
		}
		raw, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.ExecContext(t.Context(), "ALTER TABLE jobs RENAME TO jobs_gone"); err != nil {
			t.Fatalf("break the jobs table: %v", err)
		}
		resp := h.do(t, http.MethodGet, "/api/v1/sources/broken/archive/"+sha, header, nil)
		if resp.status < 500 {
			t.Fatalf("archive with the store failing: got %d (%s), want a 5xx", resp.status, resp.body)
		}
	})
}

// jobTokenHeader is the Authorization header of the agent running the
// first job of run runID: a job token minted as the orchestrator does.
func jobTokenHeader(t *testing.T, h *harness, runID string) http.Header {
	t.Helper()
	run, err := h.openStore(t).GetRun(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.LoadJobTokens(h.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{"Authorization": {"Bearer " + tokens.Mint(run.Jobs[0].ID, run.Jobs[0].Attempt)}}
}
