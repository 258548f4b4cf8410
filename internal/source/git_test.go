package source_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/source"
)

func TestGitMirrorFollowsOrigin(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	origin, c1, c2, _ := makeRepo(t)
	cache := filepath.Join(t.TempDir(), "mirrors", "hello.git")
	g := &source.Git{URL: "file://" + origin, CacheDir: cache}

	if got, err := g.Resolve(ctx, "main"); err != nil || got != c2 {
		t.Fatalf("resolve main: got %s, %v; want %s", got, err, c2)
	}
	if fi, err := os.Stat(filepath.Join(cache, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("mirror HEAD: %v", err)
	}

	// A new commit on the origin: a branch name is fetched again, and a sha
	// the mirror lacks is fetched on demand.
	c4 := commitTree(t, origin, merge(tree2, map[string]string{".kici/workflows/new.yml": ciV1}), "fourth")
	if got, err := g.Resolve(ctx, "main"); err != nil || got != c4 {
		t.Errorf("resolve main after a push: got %s, %v; want %s", got, err, c4)
	}
	c5 := commitTree(t, origin, tree1, "fifth")
	files, _, err := g.Workflows(ctx, c5)
	if err != nil {
		t.Fatalf("workflows of a commit not fetched yet: %v", err)
	}
	if diff := cmp.Diff([]string{".kici/workflows/ci.yml"}, paths(files)); diff != "" {
		t.Errorf("workflows of the fetched commit (-want +got):\n%s", diff)
	}
	if got, err := g.ChangedFiles(ctx, c1, c5); err != nil || len(got) != 0 {
		t.Errorf("changed files between equal trees: got %v, %v; want none", got, err)
	}

	// Another Git on the same cache directory reuses the mirror, and
	// follows a changed URL.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(origin, moved); err != nil {
		t.Fatal(err)
	}
	g2 := &source.Git{URL: "file://" + moved, CacheDir: cache}
	if got, err := g2.Resolve(ctx, c1); err != nil || got != c1 {
		t.Errorf("resolve a cached sha: got %s, %v; want %s", got, err, c1)
	}
	if got, err := g2.Resolve(ctx, "main"); err != nil || got != c5 {
		t.Errorf("resolve main at the new URL: got %s, %v; want %s", got, err, c5)
	}
}

func TestGitConcurrentUse(t *testing.T) {
	t.Parallel()
	origin, _, c2, _ := makeRepo(t)
	g := &source.Git{URL: "file://" + origin, CacheDir: filepath.Join(t.TempDir(), "m.git")}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			sha, err := g.Resolve(t.Context(), "main")
			if err != nil || sha != c2 {
				t.Errorf("resolve: got %s, %v; want %s", sha, err, c2)
				return
			}
			if _, _, err := g.Workflows(t.Context(), sha); err != nil {
				t.Errorf("workflows: %v", err)
			}
		})
	}
	wg.Wait()
}

func TestGitConfigRefused(t *testing.T) {
	t.Parallel()
	notMirror := t.TempDir()
	if err := os.WriteFile(filepath.Join(notMirror, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		git  *source.Git
	}{
		{name: "ext transport", git: &source.Git{URL: "ext::sh -c touch% /tmp/pwned", CacheDir: t.TempDir()}},
		{name: "option", git: &source.Git{URL: "--upload-pack=touch /tmp/pwned", CacheDir: t.TempDir()}},
		{name: "plain path", git: &source.Git{URL: "/srv/repo", CacheDir: t.TempDir()}},
		{name: "unknown scheme", git: &source.Git{URL: "gopher://example.com/r", CacheDir: t.TempDir()}},
		{name: "no cache dir", git: &source.Git{URL: "https://example.com/r.git"}},
		{name: "cache dir holds other files", git: &source.Git{URL: "file:///nonexistent", CacheDir: notMirror}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := tc.git.Resolve(t.Context(), "main"); err == nil {
				t.Errorf("resolve: got no error, want one")
			}
		})
	}
	for _, ok := range []string{"https://example.com/r.git", "ssh://git@example.com/r.git", "git@example.com:o/r.git", "file:///srv/r.git"} {
		if err := (&source.Git{URL: ok, CacheDir: "/x"}).Validate(); err != nil {
			t.Errorf("validate %q: %v", ok, err)
		}
	}
}

func TestGitCredentialsKeptOutOfErrors(t *testing.T) {
	t.Parallel()
	g := &source.Git{URL: "http://kici:s3cr3t-token@127.0.0.1:1/nothing.git", CacheDir: filepath.Join(t.TempDir(), "m.git")}
	_, err := g.Resolve(t.Context(), "main")
	if err == nil {
		t.Fatalf("resolve from a closed port: got no error, want one")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("got error %q, want the password masked", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("got error %q, want it to name the host", err)
	}
	if errors.Is(err, source.ErrNotFound) {
		t.Errorf("got ErrNotFound for an unreachable remote, want another error")
	}
	if entries, _ := os.ReadDir(filepath.Dir(g.CacheDir)); len(entries) != 0 {
		t.Errorf("a failed clone left %d entries in the cache's parent, want none", len(entries))
	}
}

// TestGitMirrorOwnerOnly: the mirror (in the orchestrator's data dir) is
// readable by its owner only, after the clone and after a fetch.
func TestGitMirrorOwnerOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	origin, _, _, _ := makeRepo(t)
	cache := filepath.Join(t.TempDir(), "mirrors", "hello.git")
	g := &source.Git{URL: "file://" + origin, CacheDir: cache}
	if _, err := g.Resolve(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	c4 := commitTree(t, origin, merge(tree2, map[string]string{".kici/workflows/new.yml": ciV1}), "fourth")
	if got, err := g.Resolve(ctx, "main"); err != nil || got != c4 {
		t.Fatalf("resolve main after a push: got %s, %v; want %s", got, err, c4)
	}
	n := 0
	err := filepath.WalkDir(filepath.Dir(cache), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: got mode %s, want no group or other bits", path, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("walked %d entries, want a whole repository", n)
	}
}

// TestGitFetchesPullRequestHeads checks that a commit reachable only from
// refs/pull/N/head, where GitHub keeps a fork's pull request in the base
// repository, is fetched on demand: a fork's run builds that commit while
// its workflows come from the base commit.
func TestGitFetchesPullRequestHeads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	origin, _, c2, _ := makeRepo(t)
	g := &source.Git{URL: "file://" + origin, CacheDir: filepath.Join(t.TempDir(), "m.git")}
	if _, err := g.Resolve(ctx, "main"); err != nil { // the mirror exists before the pull request
		t.Fatalf("resolve main: %v", err)
	}
	gitT(t, origin, "checkout", "-qb", "fork-patch")
	head := commitTree(t, origin, merge(tree2, map[string]string{"fork.txt": "fork code\n"}), "fork change")
	gitT(t, origin, "update-ref", "refs/pull/7/head", head)
	gitT(t, origin, "checkout", "-q", "main")
	gitT(t, origin, "branch", "-qD", "fork-patch")

	var buf bytes.Buffer
	if err := g.Archive(ctx, head, &buf); err != nil {
		t.Fatalf("archive of the pull request's head: %v", err)
	}
	if got := untar(t, buf.Bytes())["fork.txt"]; got != "fork code\n" {
		t.Errorf("fork.txt in the archive of the head: got %q, want the fork's file", got)
	}
	files, _, err := g.Workflows(ctx, c2)
	if err != nil || len(files) == 0 {
		t.Errorf("workflows of the base commit: got %d files, %v; want them", len(files), err)
	}
}
