package admincli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/apiv1"
)

// artifactServer serves run r-102's artifacts: build's bundle (files of
// the given contents), and one for "evil/job" whose bundle is what evil
// holds, listed with its real digest.
type artifactServer struct {
	srv      *httptest.Server
	bundles  map[string][]byte
	listed   map[string]string // digest listed, by job
	requests []string
}

func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"dist/app", "dist/readme.txt", "../outside.txt"} {
		body, ok := files[name]
		if !ok {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newArtifactServer(t *testing.T, bundles map[string][]byte, listed map[string]string) *artifactServer {
	s := &artifactServer{bundles: bundles, listed: listed}
	exp := fakeNow.Add(48 * time.Hour)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/runs/r-102/artifacts", func(w http.ResponseWriter, r *http.Request) {
		s.requests = append(s.requests, r.URL.RequestURI())
		var out apiv1.ArtifactList
		for _, job := range []string{"build", "evil/job"} {
			if _, ok := s.bundles[job]; !ok || (r.URL.Query().Get("job") != "" && r.URL.Query().Get("job") != job) {
				continue
			}
			a := apiv1.Artifact{ID: "a-" + job, Job: job, Size: int64(len(s.bundles[job])), SHA256: s.listed[job], FileCount: 2, ContentBytes: 13,
				Files: []apiv1.ArtifactFile{{Path: "dist/app", Size: 6}, {Path: "dist/readme.txt", Size: 7}}, CreatedAt: fakeNow}
			if job == "build" {
				a.ExpiresAt = &exp
			}
			out.Artifacts = append(out.Artifacts, a)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /api/v1/runs/r-102/artifacts/{job}", func(w http.ResponseWriter, r *http.Request) {
		s.requests = append(s.requests, r.URL.EscapedPath())
		b := s.bundles[r.PathValue("job")]
		w.Header().Set(apiv1.HeaderSHA256, sha(b))
		w.Write(b)
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// TestRunsArtifacts: the listing shows each job's files, sizes, digest
// and expiry; --download extracts each job's bundle into DIR/JOB/ (a "/"
// in the name made "_") after checking its digest; a bundle whose digest
// is not the recorded one, or whose names leave the directory, is
// refused and nothing is written outside DIR.
func TestRunsArtifacts(t *testing.T) {
	t.Parallel()
	good := tarGz(t, map[string]string{"dist/app": "binary", "dist/readme.txt": "read me"})
	t.Run("list", func(t *testing.T) {
		t.Parallel()
		s := newArtifactServer(t, map[string][]byte{"build": good}, map[string]string{"build": sha(good)})
		stdout, stderr, code := runCLI(t.Context(), []string{"runs", "artifacts", "r-102"}, map[string]string{envURL: s.srv.URL, envToken: "t"})
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, want := range []string{"JOB", "build", "13 B", "2026-03-16 12:00:00 UTC", "dist/readme.txt", sha(good)} {
			if !strings.Contains(stdout, want) {
				t.Errorf("listing: got\n%s\nwant it to show %q", stdout, want)
			}
		}
		stdout, _, _ = runCLI(t.Context(), []string{"runs", "artifacts", "r-102", "--job", "build", "-o", "json"}, map[string]string{envURL: s.srv.URL, envToken: "t"})
		var got apiv1.ArtifactList
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Artifacts) != 1 || got.Artifacts[0].SHA256 != sha(good) {
			t.Errorf("-o json: got %s (%v), want build's artifact", stdout, err)
		}
		if diff := cmp.Diff([]string{"/api/v1/runs/r-102/artifacts", "/api/v1/runs/r-102/artifacts?job=build"}, s.requests); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
	t.Run("download", func(t *testing.T) {
		t.Parallel()
		s := newArtifactServer(t, map[string][]byte{"build": good, "evil/job": good}, map[string]string{"build": sha(good), "evil/job": sha(good)})
		dir := t.TempDir()
		stdout, stderr, code := runCLI(t.Context(), []string{"runs", "artifacts", "r-102", "--download", dir}, map[string]string{envURL: s.srv.URL, envToken: "t"})
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, p := range []string{"build/dist/app", "build/dist/readme.txt", "evil_job/dist/app"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				t.Errorf("%s: got %v, want it extracted (stdout %q)", p, err, stdout)
			}
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "build", "dist", "app")); string(got) != "binary" {
			t.Errorf("build/dist/app: got %q, want %q", got, "binary")
		}
	})
	refusals := []struct {
		name    string
		bundle  []byte
		listed  string
		wantErr string
	}{
		{name: "digest mismatch", bundle: good, listed: sha([]byte("other")), wantErr: "corrupt"},
		{name: "path traversal", bundle: tarGz(t, map[string]string{"../outside.txt": "x"}), wantErr: "leaves the tree"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			listed := tt.listed
			if listed == "" {
				listed = sha(tt.bundle)
			}
			s := newArtifactServer(t, map[string][]byte{"build": tt.bundle}, map[string]string{"build": listed})
			top := t.TempDir()
			dir := filepath.Join(top, "out")
			_, stderr, code := runCLI(t.Context(), []string{"runs", "artifacts", "r-102", "--download", dir}, map[string]string{envURL: s.srv.URL, envToken: "t"})
			if code != 1 || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("got exit %d, stderr %q, want 1 saying %q", code, stderr, tt.wantErr)
			}
			for _, p := range []string{filepath.Join(top, "outside.txt"), filepath.Join(dir, "outside.txt")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}
