package artifacts_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/artifacts"
	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/bundle"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/workflow"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// makeBundle writes files (name → content) into an artifact bundle.
func makeBundle(t *testing.T, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	var buf bytes.Buffer
	w := bundle.NewWriter(&buf, bundle.ArtifactLimits)
	for _, name := range []string{"dist/app", "dist/notes.txt", "report.xml"} {
		body, ok := files[name]
		if !ok {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := w.AddFile(name, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// linkBundle is a bundle holding a symbolic link, which artifacts may not.
func linkBundle(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "x"}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

type fixture struct {
	db    *store.DB
	blobs *blobs.Dir
	svc   *artifacts.Service
	run   store.Run
	now   time.Time
}

func newFixture(t *testing.T, db *store.DB, cfg artifacts.Config) *fixture {
	t.Helper()
	bs, err := blobs.NewDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, blobs: bs, now: time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)}
	cfg.Now = func() time.Time { return f.now }
	f.svc, err = artifacts.New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, bs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nr := store.NewRun{Source: "repo", Workflow: "ci", WorkflowFile: "ci.yml", EventKind: "push"}
	for _, n := range []string{"build", "test"} {
		nr.Jobs = append(nr.Jobs, store.NewJob{Spec: workflow.Job{Name: n, Base: n, Steps: []workflow.Step{{Name: "s", Run: "true"}}}})
	}
	f.run, err = db.CreateRun(t.Context(), nr)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) upload(t *testing.T, job string, body []byte, sha string, expire time.Duration) (store.Artifact, error) {
	t.Helper()
	return f.svc.Upload(t.Context(), artifacts.Upload{RunID: f.run.ID, JobID: "j-" + job, JobName: job, SHA256: sha, Size: int64(len(body)), Expire: expire},
		bytes.NewReader(body))
}

func (f *fixture) blobCount(t *testing.T) int {
	t.Helper()
	n := 0
	if err := f.blobs.List(t.Context(), "", func(blobs.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUploadRecordsManifest: an accepted upload is stored with its file
// list, sizes, digest and expiry, reads back intact, and a second upload
// of the job replaces the first, whose blob goes.
func TestUploadRecordsManifest(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, artifacts.Config{})
		body := makeBundle(t, map[string]string{"dist/app": "binary", "report.xml": "<ok/>"})
		a, err := f.upload(t, "build", body, digest(body), 48*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.GetArtifact(t.Context(), f.run.ID, "build")
		if err != nil {
			t.Fatal(err)
		}
		exp := f.now.Add(48 * time.Hour)
		want := store.Artifact{ID: a.ID, RunID: f.run.ID, JobID: "j-build", JobName: "build", BlobKey: a.BlobKey, Size: int64(len(body)),
			SHA256: digest(body), FileCount: 2, ContentBytes: 11, CreatedAt: f.now, ExpiresAt: &exp,
			Files: []store.ArtifactFile{{Path: "dist/app", Size: 6}, {Path: "report.xml", Size: 5}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("recorded artifact (-want +got):\n%s", diff)
		}
		rc, err := f.svc.Open(t.Context(), got)
		if err != nil {
			t.Fatal(err)
		}
		read, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(read, body) {
			t.Errorf("read back: got %d bytes, %v, want the %d uploaded", len(read), err, len(body))
		}
		again := makeBundle(t, map[string]string{"dist/notes.txt": "second attempt"})
		if _, err := f.upload(t, "build", again, digest(again), 0); err != nil {
			t.Fatal(err)
		}
		if n := f.blobCount(t); n != 1 {
			t.Errorf("blobs after the replacing upload: got %d, want 1", n)
		}
	})
}

// TestUploadRefusals: a digest mismatch, a bundle over the per-job or the
// per-run limit, and a bundle with a link are refused with errors that
// say so, and store nothing.
func TestUploadRefusals(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		body := makeBundle(t, map[string]string{"dist/app": "binary"})
		size := int64(len(body))
		tests := []struct {
			name     string
			cfg      artifacts.Config
			first    bool // upload job test's bundle first
			body     []byte
			sha      string
			wantErr  error
			wantName string // the limit named
		}{
			{name: "digest mismatch", body: body, sha: digest([]byte("x")), wantErr: blobs.ErrDigestMismatch},
			{name: "per-job limit", cfg: artifacts.Config{MaxBytes: size - 1}, body: body, sha: digest(body), wantErr: blobs.ErrTooLarge, wantName: "KICI_ARTIFACT_MAX_BYTES"},
			{name: "per-run limit", cfg: artifacts.Config{MaxRunBytes: 2*size - 1}, first: true, body: body, sha: digest(body), wantErr: blobs.ErrTooLarge, wantName: "KICI_ARTIFACT_MAX_RUN_BYTES"},
			{name: "link", body: linkBundle(t), sha: digest(linkBundle(t)), wantErr: artifacts.ErrBadBundle},
			{name: "not a bundle", body: []byte("plain text"), sha: digest([]byte("plain text")), wantErr: artifacts.ErrBadBundle},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFixture(t, db, tt.cfg)
				want := 0
				if tt.first {
					if _, err := f.upload(t, "test", body, digest(body), 0); err != nil {
						t.Fatal(err)
					}
					want = 1
				}
				_, err := f.upload(t, "build", tt.body, tt.sha, 0)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("upload: got %v, want %v", err, tt.wantErr)
				}
				var le *artifacts.LimitError
				if tt.wantName != "" && (!errors.As(err, &le) || le.Name != tt.wantName) {
					t.Errorf("limit: got %v, want one naming %s", err, tt.wantName)
				}
				if n := f.blobCount(t); n != want {
					t.Errorf("blobs: got %d, want %d", n, want)
				}
				if _, err := db.GetArtifact(t.Context(), f.run.ID, "build"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("row: got %v, want none", err)
				}
			})
		}
	})
}

// TestSweep: the sweep deletes an expired artifact's row and blob, keeps
// one kept with its run, and collects an old blob no row names.
func TestSweep(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, artifacts.Config{})
		body := makeBundle(t, map[string]string{"report.xml": "r"})
		if _, err := f.upload(t, "build", body, digest(body), time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := f.upload(t, "test", body, digest(body), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.blobs.Put(t.Context(), "artifacts/gone/orphan.tgz", bytes.NewReader(body), 1<<20, ""); err != nil {
			t.Fatal(err)
		}
		st, err := f.svc.Sweep(t.Context(), f.now.Add(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(artifacts.SweepStats{Artifacts: 1, Orphans: 1}, st); diff != "" {
			t.Errorf("sweep (-want +got):\n%s", diff)
		}
		list, err := db.ListArtifacts(t.Context(), f.run.ID)
		if err != nil || len(list) != 1 || list[0].JobName != "test" {
			t.Errorf("artifacts left: got %+v, %v, want test's", list, err)
		}
		if n := f.blobCount(t); n != 1 {
			t.Errorf("blobs left: got %d, want 1", n)
		}
	})
}
