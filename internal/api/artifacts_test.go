package api_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/bundle"
	"github.com/kici-dev/kici/internal/orchestrator"
	"github.com/kici-dev/kici/internal/store"
)

// storageWorkflow: build keeps artifacts and a cache; test needs build;
// lint needs nothing. Pushes to any branch and pull requests run it.
const storageWorkflow = `name: ci
on:
  push: {}
  pull_request: {}
jobs:
  build:
    runs-on: [linux]
    artifacts: {paths: ["dist/**"], expire: 2d}
    cache:
      - {key: "deps-1", paths: [deps]}
    steps:
      - run: echo build
  test:
    needs: [build]
    runs-on: [linux]
    cache:
      - {key: "deps-1", paths: [deps]}
    steps:
      - run: echo test
  lint:
    runs-on: [linux]
    steps:
      - run: echo lint
`

// testBundle writes files into a bundle and returns it with its digest.
func testBundle(t *testing.T, files map[string][]byte) ([]byte, string) {
	t.Helper()
	dir := t.TempDir()
	var buf bytes.Buffer
	w := bundle.NewWriter(&buf, bundle.ArtifactLimits)
	for _, name := range []string{"dist/app", "dist/big", "dist/readme.txt"} {
		body, ok := files[name]
		if !ok {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := w.AddFile(name, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:])
}

// jobTokens mints, as the orchestrator does, the job token of each job of
// run runID, by job name.
func jobTokens(t *testing.T, h *harness, runID string) (map[string]http.Header, store.Run) {
	t.Helper()
	run, err := h.openStore(t).GetRun(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.LoadJobTokens(h.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]http.Header{}
	for _, j := range run.Jobs {
		out[j.Name] = http.Header{"Authorization": {"Bearer " + tokens.Mint(j.ID, j.Attempt)}}
	}
	return out, run
}

// with returns h plus one more header.
func with(h http.Header, key, value string) http.Header {
	out := h.Clone()
	out.Set(key, value)
	return out
}

// TestArtifactRoutes: a job uploads its own artifacts with its job token
// and its digest; a job that needs it fetches them byte for byte, any
// other job is refused; the operator lists and downloads them; a wrong
// digest, another job's upload and a bundle over the limit are refused
// with answers that say why.
func TestArtifactRoutes(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) { c.Storage.ArtifactMaxBytes = 64 << 10 }, func(t *testing.T, h *harness) {
		dir, _ := gitRepo(t, map[string]string{".kici/workflows/ci.yml": storageWorkflow})
		h.addSource(t, "art", dir, "")
		runID := h.trigger(t, "art")[0].ID
		tok, run := jobTokens(t, h, runID)
		body, sum := testBundle(t, map[string][]byte{"dist/app": []byte("binary"), "dist/readme.txt": []byte("read me")})
		put := "/api/v1/runs/" + runID + "/jobs/build/artifacts"

		tests := []struct {
			name    string
			header  http.Header
			path    string
			body    []byte
			want    int
			wantMsg string
		}{
			{name: "no digest", header: tok["build"], path: put, body: body, want: http.StatusBadRequest, wantMsg: "X-Kici-Sha256"},
			{name: "wrong digest", header: with(tok["build"], apiv1.HeaderSHA256, strings.Repeat("0", 64)), path: put, body: body, want: http.StatusBadRequest, wantMsg: "sha256 mismatch"},
			{name: "another job's token", header: with(tok["lint"], apiv1.HeaderSHA256, sum), path: put, body: body, want: http.StatusForbidden, wantMsg: "its own artifacts only"},
			{name: "a job without artifacts", header: with(tok["lint"], apiv1.HeaderSHA256, sum), path: "/api/v1/runs/" + runID + "/jobs/lint/artifacts", body: body, want: http.StatusConflict, wantMsg: "declares no artifacts"},
			{name: "no token", header: http.Header{apiv1.HeaderSHA256: {sum}}, path: put, body: body, want: http.StatusUnauthorized},
			{name: "accepted", header: with(tok["build"], apiv1.HeaderSHA256, sum), path: put, body: body, want: http.StatusCreated},
		}
		for _, tt := range tests {
			resp := h.do(t, http.MethodPut, tt.path, tt.header, tt.body)
			if resp.status != tt.want || !strings.Contains(string(resp.body), tt.wantMsg) {
				t.Errorf("%s: got %d %s, want %d saying %q", tt.name, resp.status, resp.body, tt.want, tt.wantMsg)
			}
		}

		big := make([]byte, 128<<10)
		_, _ = rand.Read(big) // incompressible
		bigBody, bigSum := testBundle(t, map[string][]byte{"dist/big": big})
		resp := h.do(t, http.MethodPut, put, with(tok["build"], apiv1.HeaderSHA256, bigSum), bigBody)
		if resp.status != http.StatusRequestEntityTooLarge || !strings.Contains(resp.apiError(t).Error, "KICI_ARTIFACT_MAX_BYTES") {
			t.Errorf("over the limit: got %d %s, want 413 naming KICI_ARTIFACT_MAX_BYTES", resp.status, resp.body)
		}

		fetch := "/api/v1/runs/" + runID + "/jobs/build/artifacts"
		resp = h.do(t, http.MethodGet, fetch, tok["test"], nil)
		if resp.status != http.StatusOK || !bytes.Equal(resp.body, body) || resp.header.Get(apiv1.HeaderSHA256) != sum {
			t.Errorf("downstream fetch: got %d, %d bytes, digest %q, want 200 and the bundle uploaded", resp.status, len(resp.body), resp.header.Get(apiv1.HeaderSHA256))
		}
		if resp := h.do(t, http.MethodGet, fetch, tok["lint"], nil); resp.status != http.StatusForbidden {
			t.Errorf("fetch by a job that does not need build: got %d %s, want 403", resp.status, resp.body)
		}

		var list apiv1.ArtifactList
		h.mustAdmin(t, http.MethodGet, "/api/v1/runs/"+runID+"/artifacts", nil, http.StatusOK, &list)
		if len(list.Artifacts) != 1 {
			t.Fatalf("list: got %d artifacts, want 1", len(list.Artifacts))
		}
		a := list.Artifacts[0]
		if diff := cmp.Diff([]apiv1.ArtifactFile{{Path: "dist/app", Size: 6}, {Path: "dist/readme.txt", Size: 7}}, a.Files); diff != "" {
			t.Errorf("listed files (-want +got):\n%s", diff)
		}
		if a.Job != "build" || a.JobID != run.Jobs[0].ID || a.SHA256 != sum || a.ExpiresAt == nil || a.ExpiresAt.Sub(a.CreatedAt).Hours() != 48 {
			t.Errorf("listed artifact: got %+v, want build's, expiring 48 h after its creation", a)
		}
		resp = h.admin(t, http.MethodGet, "/api/v1/runs/"+runID+"/artifacts/build", nil)
		if resp.status != http.StatusOK || !bytes.Equal(resp.body, body) {
			t.Errorf("admin download: got %d, %d bytes, want the bundle", resp.status, len(resp.body))
		}
		if resp := h.admin(t, http.MethodGet, "/api/v1/runs/"+runID+"/artifacts/lint", nil); resp.status != http.StatusNotFound {
			t.Errorf("download of a job without artifacts: got %d, want 404", resp.status)
		}
	})
}

// cacheRequest sends a cache route's request with tok.
func cacheRequest(t *testing.T, h *harness, tok http.Header, method, key string, restore []string, body []byte) response {
	t.Helper()
	q := url.Values{"key": {key}, "version": {"00112233445566778899aabbccddeeff"}, "restore": restore}
	header := tok
	if body != nil {
		sum := sha256.Sum256(body)
		header = with(tok, apiv1.HeaderSHA256, hex.EncodeToString(sum[:]))
	}
	return h.do(t, method, "/api/v1/caches?"+q.Encode(), header, body)
}

// TestCacheScopes: a push saves into its branch's scope; a pull request
// from a fork restores what its base branch saved, saves into its own
// scope only, and the base branch never sees that; an entry of another
// scope cannot be fetched by id; a job without a cache is refused.
func TestCacheScopes(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, base := gitRepo(t, map[string]string{".kici/workflows/ci.yml": storageWorkflow, "README.md": "a\n"})
		git(t, dir, "checkout", "-q", "-b", "patch-1")
		writeFile(t, dir, "README.md", "b\n")
		git(t, dir, "-c", "user.name=m", "-c", "user.email=m@kici.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-am", "change")
		head := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
		git(t, dir, "update-ref", "refs/pull/7/head", head)
		git(t, dir, "checkout", "-q", "main")
		h.addForkSource(t, "scoped", dir, "run")

		push, _ := jobTokens(t, h, h.trigger(t, "scoped")[0].ID)
		if resp := cacheRequest(t, h, push["build"], http.MethodGet, "deps-1", nil, nil); resp.status != http.StatusNoContent {
			t.Fatalf("first lookup: got %d %s, want 204 (a miss)", resp.status, resp.body)
		}
		var saved apiv1.CacheSaved
		resp := cacheRequest(t, h, push["build"], http.MethodPut, "deps-1", nil, []byte("main's bundle"))
		resp.decode(t, &saved)
		if resp.status != http.StatusCreated || saved.Scope != "branch:main" {
			t.Fatalf("push save: got %d %s, want 201 in branch:main", resp.status, resp.body)
		}
		if resp := cacheRequest(t, h, push["lint"], http.MethodGet, "deps-1", nil, nil); resp.status != http.StatusConflict {
			t.Errorf("lookup by a job without a cache: got %d, want 409", resp.status)
		}

		pr, _ := jobTokens(t, h, h.forkRunID(t, "scoped", "pr-delivery-1", base, head))
		var hit apiv1.CacheHit
		resp = cacheRequest(t, h, pr["build"], http.MethodGet, "deps-1", nil, nil)
		resp.decode(t, &hit)
		if resp.status != http.StatusOK || !hit.Exact || hit.Scope != "branch:main" {
			t.Fatalf("pull request lookup: got %d %s, want the base branch's entry", resp.status, resp.body)
		}
		if resp := h.do(t, http.MethodGet, "/api/v1/caches/"+hit.ID, pr["build"], nil); resp.status != http.StatusOK || string(resp.body) != "main's bundle" {
			t.Errorf("pull request fetch: got %d %q, want main's bundle", resp.status, resp.body)
		}
		resp = cacheRequest(t, h, pr["build"], http.MethodPut, "deps-1", nil, []byte("the fork's bundle"))
		resp.decode(t, &saved)
		if resp.status != http.StatusCreated || saved.Scope != "pull:7" {
			t.Fatalf("pull request save: got %d %s, want 201 in pull:7", resp.status, resp.body)
		}
		prEntry := saved.ID

		push2, _ := jobTokens(t, h, h.trigger(t, "scoped")[0].ID)
		resp = cacheRequest(t, h, push2["build"], http.MethodGet, "deps-1", nil, nil)
		resp.decode(t, &hit)
		if resp.status != http.StatusOK || hit.Scope != "branch:main" {
			t.Errorf("push lookup after the pull request: got %d %s, want main's own entry", resp.status, resp.body)
		}
		if resp := h.do(t, http.MethodGet, "/api/v1/caches/"+hit.ID, push2["build"], nil); string(resp.body) != "main's bundle" {
			t.Errorf("push fetch after the pull request: got %q, want main's bundle (the fork's never reaches main)", resp.body)
		}
		if resp := h.do(t, http.MethodGet, "/api/v1/caches/"+prEntry, push2["build"], nil); resp.status != http.StatusNotFound {
			t.Errorf("push fetch of the pull request's entry by id: got %d, want 404", resp.status)
		}
	})
}
