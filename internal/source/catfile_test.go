package source_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/workflow"
)

// gitKinds are the kinds of source read through a git cat-file process.
// fn gets the origin repository and the one the source reads (the same
// for a local source, the mirror for a git source).
func forEachGitKind(t *testing.T, fn func(t *testing.T, f fixture, origin, readDir string)) {
	t.Helper()
	for _, name := range []string{"local", "git"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, c1, c2, c3 := makeRepo(t)
			f := fixture{c1: c1, c2: c2, c3: c3}
			readDir := dir
			if name == "local" {
				f.src = &source.Local{Path: dir}
			} else {
				readDir = filepath.Join(t.TempDir(), "mirror.git")
				f.src = &source.Git{URL: "file://" + dir, CacheDir: readDir}
			}
			t.Cleanup(func() { _ = f.src.(interface{ Close() error }).Close() })
			fn(t, f, dir, readDir)
		})
	}
}

// cliWorkflows reads the workflows at sha the way the sources did with
// separate git commands: git ls-tree of the workflows directory and the
// lock, regular files only, then each blob.
func cliWorkflows(t *testing.T, dir, sha string) (map[string]string, string) {
	t.Helper()
	out := gitT(t, dir, "ls-tree", "-z", "-l", sha, "--", workflow.WorkflowsDir+"/", workflow.LockPath)
	files := map[string]string{}
	lock := ""
	for _, rec := range strings.Split(out, "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 || f[1] != "blob" || (f[0] != "100644" && f[0] != "100755") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p))) // the work tree is at sha
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case p == workflow.LockPath:
			lock = string(data)
		case workflow.IsWorkflowFile(p):
			files[p] = string(data)
		}
	}
	return files, lock
}

// TestCatFileReadsMatchTheCLI checks that refs resolve to what git
// rev-parse says, and that the workflows of a tree of many odd entries
// are what git ls-tree and the blobs say.
func TestCatFileReadsMatchTheCLI(t *testing.T) {
	t.Parallel()
	forEachGitKind(t, func(t *testing.T, f fixture, origin, readDir string) {
		tree := map[string]string{workflow.LockPath: lock, "README.md": "x\n"}
		for i := range workflow.MaxFiles - 4 {
			tree[fmt.Sprintf("%s/w%03d.yml", workflow.WorkflowsDir, i)] = fmt.Sprintf("name: w%d\n", i)
		}
		for _, p := range []string{"with space.yml", "ünï.yaml", ".hidden.yml", "notes.txt", "x.YML", "sub/deep.yml", "x.yml.bak"} {
			tree[workflow.WorkflowsDir+"/"+p] = "name: " + p + "\n"
		}
		gitT(t, origin, "checkout", "-qb", "many")
		sha := commitTree(t, origin, tree, "many")
		// An executable workflow counts; a symlink does not.
		if err := os.Chmod(filepath.Join(origin, workflow.WorkflowsDir, "w000.yml"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("w001.yml", filepath.Join(origin, workflow.WorkflowsDir, "link.yml")); err != nil {
			t.Fatal(err)
		}
		gitT(t, origin, "add", "-A")
		gitT(t, origin, "commit", "-qm", "modes")
		sha2 := gitT(t, origin, "rev-parse", "HEAD")
		for _, at := range []string{sha, sha2, f.c1, f.c2, f.c3} {
			gitT(t, origin, "checkout", "-q", at)
			wantFiles, wantLock := cliWorkflows(t, origin, at)
			files, gotLock, err := f.src.Workflows(t.Context(), at)
			if err != nil {
				t.Fatalf("workflows at %s: %v", at, err)
			}
			if diff := cmp.Diff(wantFiles, fileMap(files)); diff != "" {
				t.Errorf("workflows at %s (-git ls-tree +got):\n%s", at, diff)
			}
			if string(gotLock) != wantLock || (wantLock == "") != (gotLock == nil) {
				t.Errorf("lock at %s: got %q, want %q", at, gotLock, wantLock)
			}
		}
		if files, _, _ := f.src.Workflows(t.Context(), sha2); len(files) != workflow.MaxFiles-4+2 {
			t.Errorf("got %d files, want %d (the numbered ones, the space and the unicode name)", len(files), workflow.MaxFiles-2)
		}
		gitT(t, origin, "checkout", "-q", "many")
		for _, ref := range []string{"main", "HEAD", "many", "v1", "refs/tags/v1", "feature/x", "many~1", "v1^{}",
			f.c1[:10], strings.ToUpper(f.c2)} {
			got, err := f.src.Resolve(t.Context(), ref) // a git source fetches first
			want := gitT(t, readDir, "rev-parse", "--verify", "--end-of-options", ref+"^{commit}")
			if err != nil || got != want {
				t.Errorf("resolve %q: got %q, %v; want %q (git rev-parse)", ref, got, err, want)
			}
		}
	})
}

// TestCatFileFileOverLimit checks that a workflow file over
// source.MaxFileBytes is refused by name, and that the next read works.
func TestCatFileFileOverLimit(t *testing.T) {
	t.Parallel()
	forEachGitKind(t, func(t *testing.T, f fixture, origin, readDir string) {
		big := commitTree(t, origin, map[string]string{
			workflow.WorkflowsDir + "/big.yml": strings.Repeat("#", source.MaxFileBytes+1),
			workflow.WorkflowsDir + "/ci.yml":  ciV1,
		}, "big")
		_, _, err := f.src.Workflows(t.Context(), big)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("big.yml is %d bytes, over the limit", source.MaxFileBytes+1)) {
			t.Fatalf("got %v, want big.yml over the limit", err)
		}
		files, _, err := f.src.Workflows(t.Context(), f.c1)
		if diff := cmp.Diff(map[string]string{".kici/workflows/ci.yml": ciV1}, fileMap(files)); err != nil || diff != "" {
			t.Errorf("next read: %v (-want +got):\n%s", err, diff)
		}
	})
}

// TestCatFileRestartedWhenKilled checks that a cat-file process killed
// from outside is replaced by the next read.
func TestCatFileRestartedWhenKilled(t *testing.T) {
	t.Parallel()
	forEachGitKind(t, func(t *testing.T, f fixture, _, _ string) {
		if _, _, err := f.src.Workflows(t.Context(), f.c2); err != nil {
			t.Fatal(err)
		}
		pid := source.CatFilePID(f.src)
		if pid == 0 || !source.KillCatFile(f.src) {
			t.Fatalf("no cat-file process ran after a read (pid %d)", pid)
		}
		for _, ref := range []string{f.c1, f.c2} { // the first finds it dead
			files, _, err := f.src.Workflows(t.Context(), ref)
			if err != nil || len(files) == 0 {
				t.Fatalf("workflows after the kill: got %d files, %v", len(files), err)
			}
		}
		if got := source.CatFilePID(f.src); got == 0 || got == pid {
			t.Errorf("cat-file pid after the kill: got %d, want a new process (old %d)", got, pid)
		}
	})
}

// TestCatFileCancelMidRequest checks that a ctx cancelled after a request
// was written, before its answer was read, fails that call only: the
// next call does not read the answer left in the stream.
func TestCatFileCancelMidRequest(t *testing.T) {
	t.Parallel()
	forEachGitKind(t, func(t *testing.T, f fixture, _, _ string) {
		if _, err := f.src.Resolve(t.Context(), f.c1); err != nil { // start the process
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var once sync.Once
		source.SetCatFileAfterWrite(f.src, func() { once.Do(cancel) })
		if _, _, err := f.src.Workflows(ctx, f.c2); !errors.Is(err, context.Canceled) {
			t.Fatalf("workflows with a ctx cancelled mid-request: got %v, want context.Canceled", err)
		}
		source.SetCatFileAfterWrite(f.src, nil)
		files, lk, err := f.src.Workflows(t.Context(), f.c1)
		if err != nil {
			t.Fatalf("next workflows: %v", err)
		}
		if diff := cmp.Diff(map[string]string{".kici/workflows/ci.yml": ciV1}, fileMap(files)); diff != "" || lk != nil {
			t.Errorf("next workflows read another answer: lock %q (-want +got):\n%s", lk, diff)
		}
		if got, err := f.src.Resolve(t.Context(), "bare"); err != nil || got != f.c3 {
			t.Errorf("resolve bare: got %q, %v; want %s", got, err, f.c3)
		}
	})
}

// TestCatFileRefusesNewlinesAndOptions checks that a ref holding a
// newline (which would be a second name to cat-file) or starting with
// "-" is refused before it reaches git.
func TestCatFileRefusesNewlinesAndOptions(t *testing.T) {
	t.Parallel()
	forEachGitKind(t, func(t *testing.T, f fixture, _, _ string) {
		for _, ref := range []string{"main\n", "bare\nmain", "main\r", "-main", "--batch-all-objects", "main\x00"} {
			if sha, err := f.src.Resolve(t.Context(), ref); !errors.Is(err, source.ErrInvalidRef) {
				t.Errorf("resolve %q: got %q, %v; want ErrInvalidRef", ref, sha, err)
			}
		}
		if got, err := f.src.Resolve(t.Context(), "main"); err != nil || got != f.c2 {
			t.Errorf("resolve main after the refusals: got %q, %v; want %s", got, err, f.c2)
		}
	})
}

// TestCatFileSeesLaterObjects checks that commits made after the
// cat-file process started are found: for a local source by the same
// process (git reads refs and looks for new packs on a miss), also after
// a gc packed the objects and refs; for a git source after the fetch its
// read needs.
func TestCatFileSeesLaterObjects(t *testing.T) {
	t.Parallel()
	forEachGitKind(t, func(t *testing.T, f fixture, origin, readDir string) {
		if got, err := f.src.Resolve(t.Context(), "main"); err != nil || got != f.c2 {
			t.Fatalf("resolve main: got %q, %v; want %s", got, err, f.c2)
		}
		pid := source.CatFilePID(f.src)
		later := ".kici/workflows/later.yml"
		for i, gc := range []bool{false, true} {
			if gc {
				gitT(t, origin, "gc", "-q", "--prune=now")
			}
			c := commitTree(t, origin, merge(tree2, map[string]string{later: fmt.Sprintf("name: later%d\n", i)}), "later")
			got, err := f.src.Resolve(t.Context(), "main")
			if err != nil || got != c {
				t.Fatalf("resolve main after commit %d (gc %v): got %q, %v; want %s", i, gc, got, err, c)
			}
			files, _, err := f.src.Workflows(t.Context(), got)
			if err != nil || fileMap(files)[later] != fmt.Sprintf("name: later%d\n", i) {
				t.Fatalf("workflows at the later commit: %v, %v", paths(files), err)
			}
		}
		// A commit no ref names yet: the git source's read fetches it.
		gitT(t, origin, "checkout", "-qb", "side")
		side := commitTree(t, origin, map[string]string{later: "name: side\n"}, "side")
		files, _, err := f.src.Workflows(t.Context(), side)
		if err != nil || fileMap(files)[later] != "name: side\n" {
			t.Fatalf("workflows at a commit made after the process started: %v, %v", paths(files), err)
		}
		if _, ok := f.src.(*source.Local); ok {
			if got := source.CatFilePID(f.src); got != pid {
				t.Errorf("cat-file pid: got %d, want %d: the local source's process should have seen the new objects itself", got, pid)
			}
		}
	})
}
