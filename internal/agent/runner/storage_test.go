//go:build unix

package runner_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/workflow"
)

// storageJob is a job named name that runs script in a fresh directory,
// keeping its artifacts and caches in f.
func storageJob(t *testing.T, f *fakeStorage, name, script string) runner.JobSpec {
	t.Helper()
	spec := dirJob(t, workflow.Step{Run: script})
	spec.ID, spec.Job.Name, spec.Token = name, name, f.token
	spec.Storage = runner.Storage{APIURL: f.apiURL(), RunID: "run-1"}
	return spec
}

// notes returns the job-level lines of a recorder.
func notes(rec *recorder) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.lines[runner.JobLevelStep])
}

// hasNote reports whether a job-level line starts with "[kici] "+prefix.
func hasNote(rec *recorder, prefix string) bool {
	for _, l := range notes(rec) {
		if strings.HasPrefix(l, "[kici] "+prefix) {
			return true
		}
	}
	return false
}

// TestArtifactsPassDownstream: a job's artifacts (regular files its
// paths match; a symbolic link and unmatched files left out) are uploaded
// after its steps and are in the workspace of a job that needs it before
// its steps; a needed job without artifacts is skipped.
func TestArtifactsPassDownstream(t *testing.T) {
	t.Parallel()
	f := newFakeStorage(t, "jt")
	r := newRunner(t, nil)
	build := storageJob(t, f, "build", "mkdir -p dist/sub && echo bin > dist/app && echo n > dist/sub/notes.txt && ln -s /etc/passwd dist/link && echo x > other.txt")
	build.Job.Artifacts = &workflow.Artifacts{Paths: []string{"dist/**"}}
	rec := newRecorder()
	if res := r.Run(t.Context(), build, rec); res.Status != runner.StatusSuccess {
		t.Fatalf("build: got %s (%v), want success\n%s", res.Status, res.Err, strings.Join(notes(rec), "\n"))
	}
	if !hasNote(rec, "artifacts uploaded: ") || !hasNote(rec, "artifacts: 1 symbolic links left out") {
		t.Errorf("build notes: got %q, want the upload and the link left out", notes(rec))
	}
	test := storageJob(t, f, "test", "cat dist/app dist/sub/notes.txt && test ! -e dist/link && test ! -e other.txt")
	test.Job.Needs = []workflow.Need{{Job: "build", On: []string{"success"}}, {Job: "lint", On: []string{"success"}}}
	rec = newRecorder()
	if res := r.Run(t.Context(), test, rec); res.Status != runner.StatusSuccess {
		t.Fatalf("test: got %s (%v), want success\nnotes: %q\nstep: %q", res.Status, res.Err, notes(rec), rec.lines[0])
	}
	if got := rec.lines[0]; !slices.Equal(got, []string{"bin", "n"}) {
		t.Errorf("downstream step output: got %q, want the artifacts' contents", got)
	}
	if !hasNote(rec, "artifacts of build: 2 files") {
		t.Errorf("test notes: got %q, want the artifacts of build extracted", notes(rec))
	}
}

// TestArtifactsWhen: artifacts are uploaded after a success, after a
// failure only with when: always, and a job whose upload is refused
// fails.
func TestArtifactsWhen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		script       string
		when         string
		token        string // the token the job sends; "" for the right one
		wantUploaded bool
		wantStatus   runner.Status
	}{
		{name: "success", script: "echo a > out.txt", wantUploaded: true, wantStatus: runner.StatusSuccess},
		{name: "failure", script: "echo a > out.txt; exit 3", wantStatus: runner.StatusFailure},
		{name: "failure, always", script: "echo a > out.txt; exit 3", when: workflow.ArtifactsAlways, wantUploaded: true, wantStatus: runner.StatusFailure},
		{name: "upload refused", script: "echo a > out.txt", token: "wrong", wantStatus: runner.StatusFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeStorage(t, "jt")
			spec := storageJob(t, f, "build", tt.script)
			if tt.token != "" {
				spec.Token = tt.token
			}
			spec.Job.Artifacts = &workflow.Artifacts{Paths: []string{"out.txt"}, When: tt.when}
			rec := newRecorder()
			res := newRunner(t, nil).Run(t.Context(), spec, rec)
			if res.Status != tt.wantStatus {
				t.Errorf("status: got %s (%v), want %s", res.Status, res.Err, tt.wantStatus)
			}
			f.mu.Lock()
			_, uploaded := f.artifacts["build"]
			f.mu.Unlock()
			if uploaded != tt.wantUploaded {
				t.Errorf("uploaded: got %t, want %t (notes %q)", uploaded, tt.wantUploaded, notes(rec))
			}
		})
	}
}

// craftedTar is a tar.gz of entries as given, unchecked.
func craftedTar(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		body := []byte("planted")
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(body); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// TestUpstreamBundleRefused: an upstream bundle that would write outside
// the workspace, holds a link, or does not have its digest fails the job
// as an infrastructure failure before its steps, and nothing lands
// outside the workspace.
func TestUpstreamBundleRefused(t *testing.T) {
	t.Parallel()
	good := craftedTar(t, tar.Header{Name: "ok.txt", Typeflag: tar.TypeReg})
	tests := []struct {
		name    string
		bundle  []byte
		sha     string // "" for the bundle's own
		wantErr string
	}{
		{name: "dot-dot", bundle: craftedTar(t, tar.Header{Name: "../escape.txt", Typeflag: tar.TypeReg}), wantErr: "leaves the tree"},
		{name: "absolute", bundle: craftedTar(t, tar.Header{Name: "/tmp/escape.txt", Typeflag: tar.TypeReg}), wantErr: "leaves the tree"},
		{name: "link", bundle: craftedTar(t, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../"}), wantErr: "symbolic link"},
		{name: "digest mismatch", bundle: good, sha: digest([]byte("other")), wantErr: "corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeStorage(t, "jt")
			sum := tt.sha
			if sum == "" {
				sum = digest(tt.bundle)
			}
			f.served["build"], f.servedSHA["build"] = tt.bundle, sum
			spec := storageJob(t, f, "test", "echo ran")
			spec.Job.Needs = []workflow.Need{{Job: "build", On: []string{"success"}}}
			rec := newRecorder()
			res := newRunner(t, nil).Run(t.Context(), spec, rec)
			if res.Status != runner.StatusFailure || !errors.Is(res.Err, runner.ErrInfrastructure) || !strings.Contains(errText(res.Err), tt.wantErr) {
				t.Errorf("result: got %s (%v), want an infrastructure failure saying %q", res.Status, res.Err, tt.wantErr)
			}
			if got := rec.finals(); !slices.Equal(got, []runner.Status{runner.StatusSkipped}) {
				t.Errorf("steps: got %v, want the step skipped", got)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(spec.Source.Dir), "escape.txt")); err == nil {
				t.Errorf("escape.txt was written outside the workspace")
			}
		})
	}
}

// TestCacheMissThenHit: the first job misses, runs, and saves its paths
// (in the workspace and under HOME); the next job with the same
// hashFiles key hits and finds them before its steps, saving nothing;
// one whose key changed restores through a restore key and saves under
// its new key.
func TestCacheMissThenHit(t *testing.T) {
	t.Parallel()
	f := newFakeStorage(t, "jt")
	r := newRunner(t, nil)
	home := t.TempDir()
	job := func(lock, script string) runner.JobSpec {
		spec := storageJob(t, f, "build", script)
		if err := os.WriteFile(filepath.Join(spec.Source.Dir, "lock.txt"), []byte(lock), 0o644); err != nil {
			t.Fatal(err)
		}
		spec.Env = map[string]string{"HOME": home}
		spec.Job.Cache = []workflow.Cache{{Key: "deps-${{ hashFiles('lock.txt') }}", Paths: []string{"deps", "~/.tool"}, RestoreKeys: []string{"deps-"}}}
		return spec
	}
	run := func(spec runner.JobSpec) *recorder {
		t.Helper()
		rec := newRecorder()
		if res := r.Run(t.Context(), spec, rec); res.Status != runner.StatusSuccess {
			t.Fatalf("got %s (%v), want success\nnotes: %q\nstep: %q", res.Status, res.Err, notes(rec), rec.lines[0])
		}
		return rec
	}
	rec := run(job("v1", `test ! -e deps/a && mkdir -p deps "$HOME/.tool" && echo A > deps/a && echo T > "$HOME/.tool/t"`))
	if !hasNote(rec, "cache miss: deps-") || !hasNote(rec, "cache saved: deps-") {
		t.Fatalf("first job notes: got %q, want a miss and a save", notes(rec))
	}
	if err := os.RemoveAll(filepath.Join(home, ".tool")); err != nil {
		t.Fatal(err)
	}
	rec = run(job("v1", `cat deps/a "$HOME/.tool/t"`))
	if !hasNote(rec, "cache hit: deps-") || hasNote(rec, "cache saved") {
		t.Errorf("second job notes: got %q, want a hit and no save", notes(rec))
	}
	if got := rec.lines[0]; !slices.Equal(got, []string{"A", "T"}) {
		t.Errorf("second job's step: got %q, want the restored files", got)
	}
	rec = run(job("v2", `cat deps/a`))
	if !hasNote(rec, "cache hit on a restore key: deps-") || !hasNote(rec, "cache saved: deps-") {
		t.Errorf("third job notes: got %q, want a restore-key hit and a save", notes(rec))
	}
	f.mu.Lock()
	n := len(f.caches)
	f.mu.Unlock()
	if n != 2 {
		t.Errorf("saved entries: got %d, want 2 (one per lock.txt)", n)
	}
}

// TestCacheRestoreStaysInDeclaredPaths: a cache bundle's entries of
// paths the job does not declare are not written, and one with a link
// out of its declared path is not restored at all; the job still runs.
func TestCacheRestoreStaysInDeclaredPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []tar.Header
		want    []string // files that exist after, relative to the workspace
		notWant []string
	}{
		{name: "unknown path index", entries: []tar.Header{{Name: "0/ok.txt", Typeflag: tar.TypeReg}, {Name: "7/stray.txt", Typeflag: tar.TypeReg}},
			want: []string{"deps/ok.txt"}, notWant: []string{"stray.txt", "deps/stray.txt"}},
		{name: "link out of the declared path", entries: []tar.Header{{Name: "0/l", Typeflag: tar.TypeSymlink, Linkname: "../elsewhere"}, {Name: "0/l/x", Typeflag: tar.TypeReg}},
			notWant: []string{"elsewhere/x", "deps/l"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeStorage(t, "jt")
			spec := storageJob(t, f, "build", "echo ran")
			spec.Job.Cache = []workflow.Cache{{Key: "k", Paths: []string{"deps"}}}
			f.caches["k@"+runner.CacheVersionForTest([]string{"deps"})] = craftedTar(t, tt.entries...)
			rec := newRecorder()
			if res := newRunner(t, nil).Run(t.Context(), spec, rec); res.Status != runner.StatusSuccess {
				t.Fatalf("got %s (%v), want success (a bad cache never fails a job)", res.Status, res.Err)
			}
			for _, p := range tt.want {
				if _, err := os.Stat(filepath.Join(spec.Source.Dir, p)); err != nil {
					t.Errorf("%s: got %v, want it restored", p, err)
				}
			}
			for _, p := range tt.notWant {
				if _, err := os.Lstat(filepath.Join(spec.Source.Dir, p)); err == nil {
					t.Errorf("%s: written, want it refused (notes %q)", p, notes(rec))
				}
			}
		})
	}
}

// TestHashFiles: the digest depends on the matched files' paths and
// contents only: the same tree made in another order (and at another
// time) gives the same digest, a changed byte or name another, and no
// match the empty string.
func TestHashFiles(t *testing.T) {
	t.Parallel()
	tree := func(files map[string]string, order []string) string {
		dir := t.TempDir()
		for _, name := range order {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	files := map[string]string{"go.sum": "a", "sub/go.sum": "b", "README": "c"}
	one := tree(files, []string{"go.sum", "sub/go.sum", "README"})
	two := tree(files, []string{"README", "sub/go.sum", "go.sum"})
	changed := tree(map[string]string{"go.sum": "a", "sub/go.sum": "B", "README": "c"}, []string{"go.sum", "sub/go.sum", "README"})
	renamed := tree(map[string]string{"go.sum": "a", "other/go.sum": "b"}, []string{"go.sum", "other/go.sum"})
	pats := []string{"**/go.sum"}
	h1, err := runner.HashFilesForTest(one, pats)
	if err != nil || len(h1) != 64 {
		t.Fatalf("hash: got %q, %v, want 64 hex digits", h1, err)
	}
	for _, tt := range []struct {
		name string
		dir  string
		pats []string
		same bool
	}{
		{name: "same tree, other order", dir: two, pats: pats, same: true},
		{name: "unmatched file differs", dir: tree(map[string]string{"go.sum": "a", "sub/go.sum": "b", "README": "zzz"}, []string{"README", "go.sum", "sub/go.sum"}), pats: pats, same: true},
		{name: "a byte changed", dir: changed, pats: pats},
		{name: "a file renamed", dir: renamed, pats: pats},
	} {
		got, err := runner.HashFilesForTest(tt.dir, tt.pats)
		if err != nil || (got == h1) != tt.same {
			t.Errorf("%s: got %q (%v), same as the first %t, want %t", tt.name, got, err, got == h1, tt.same)
		}
	}
	if got, err := runner.HashFilesForTest(one, []string{"*.lock"}); err != nil || got != "" {
		t.Errorf("no match: got %q, %v, want \"\"", got, err)
	}
}
