package source_test

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/source/githubfake"
)

// branchedRepo makes a repository where main and feature part at fork:
//
//	fork     a.txt, old.txt, gone.txt
//	main     fork + a.txt changed (main's own change, after the fork)
//	feature  fork + docs/a.md added, old.txt renamed to new.txt, gone.txt removed
//	orphan   a history of its own
func branchedRepo(t *testing.T) (dir, main, feature, orphan string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "origin")
	gitT(t, t.TempDir(), "init", "-q", "-b", "main", dir)
	base := map[string]string{"a.txt": "a\n", "old.txt": "same content, renamed\n", "gone.txt": "bye\n"}
	commitTree(t, dir, base, "fork point")
	gitT(t, dir, "checkout", "-qb", "feature")
	feature = commitTree(t, dir, map[string]string{
		"a.txt": "a\n", "new.txt": "same content, renamed\n", "docs/a.md": "# a\n",
	}, "feature work")
	gitT(t, dir, "checkout", "-q", "main")
	main = commitTree(t, dir, merge(base, map[string]string{"a.txt": "main moved on\n"}), "main work")
	gitT(t, dir, "checkout", "-q", "--orphan", "orphan")
	gitT(t, dir, "rm", "-rqf", ".")
	orphan = commitTree(t, dir, map[string]string{"z.txt": "z\n"}, "unrelated")
	gitT(t, dir, "checkout", "-q", "main")
	return dir, main, feature, orphan
}

// TestMergeBaseFilesGit diffs a branch against its merge base with main,
// on a local and a git source: the branch's own changes (an addition, both
// sides of a rename, a deletion), not main's; no common history is unknown.
func TestMergeBaseFilesGit(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"local", "git"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir, main, feature, orphan := branchedRepo(t)
			var src source.Source = &source.Local{Path: dir}
			if kind == "git" {
				src = &source.Git{URL: "file://" + dir, CacheDir: filepath.Join(t.TempDir(), "mirror.git")}
			}
			want := []string{"docs/a.md", "gone.txt", "new.txt", "old.txt"}
			got, err := src.MergeBaseFiles(t.Context(), main, feature)
			if err != nil {
				t.Fatalf("merge base files: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("merge base files (-want +got):\n%s", diff)
			}
			got, err = src.PullRequestFiles(t.Context(), 7, main, feature)
			if err != nil {
				t.Fatalf("pull request files: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pull request files (-want +got):\n%s", diff)
			}
			// main changes only what it changed since the fork.
			got, err = src.MergeBaseFiles(t.Context(), feature, main)
			if err != nil || !slices.Equal(got, []string{"a.txt"}) {
				t.Errorf("main since the fork: got %v, %v; want [a.txt]", got, err)
			}
			got, err = src.MergeBaseFiles(t.Context(), main, main)
			if err != nil || got == nil || len(got) != 0 {
				t.Errorf("a commit against itself: got %#v, %v; want known and empty", got, err)
			}
			got, err = src.MergeBaseFiles(t.Context(), main, orphan)
			if err != nil || got != nil {
				t.Errorf("no common history: got %#v, %v; want nil (unknown)", got, err)
			}
			missing := strings.Repeat("ab", 20)
			if _, err := src.PullRequestFiles(t.Context(), 7, main, missing); !errors.Is(err, source.ErrNotFound) || !strings.Contains(err.Error(), "#7") {
				t.Errorf("unknown head: got %v, want ErrNotFound naming pull request #7", err)
			}
			if _, err := src.MergeBaseFiles(t.Context(), "--output=/tmp/x", feature); !errors.Is(err, source.ErrInvalidRef) {
				t.Errorf("option as base: got %v, want ErrInvalidRef", err)
			}
		})
	}
}

// prFiles returns n paths f/0000 … of a pull request's head tree.
func prFiles(n int) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("f/%04d.txt", i)] = "x\n"
	}
	return files
}

// TestPullRequestFilesGitHub lists pull requests' files through the fake's
// files API: page by page at 100 a page, a rename as both its paths, 3000
// files known, and past GitHub's cap of 3000 ErrTooManyChangedFiles.
func TestPullRequestFilesGitHub(t *testing.T) {
	t.Parallel()
	fake := githubfake.New(fakeToken)
	t.Cleanup(fake.Close)
	base := fake.AddCommit(fakeRepo, map[string]string{"old.txt": "o\n", "keep.txt": "k\n"})
	small := fake.AddCommit(fakeRepo, merge(prFiles(249), map[string]string{"new.txt": "o\n", "keep.txt": "k\n"}))
	fake.SetPullRequest(fakeRepo, 1, base, small, map[string]string{"new.txt": "old.txt"})
	full := fake.AddCommit(fakeRepo, merge(prFiles(2999), map[string]string{"keep.txt": "k\n"})) // + old.txt removed
	fake.SetPullRequest(fakeRepo, 2, base, full, nil)
	over := fake.AddCommit(fakeRepo, merge(prFiles(3000), map[string]string{"keep.txt": "k\n"}))
	fake.SetPullRequest(fakeRepo, 3, base, over, nil)
	g := &source.GitHub{Repo: fakeRepo, Token: fakeToken, APIBaseURL: fake.URL}

	got, err := g.PullRequestFiles(t.Context(), 1, base, small)
	if err != nil {
		t.Fatalf("pull request 1: %v", err)
	}
	want := append(slices.Sorted(maps.Keys(prFiles(249))), "new.txt", "old.txt")
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pull request 1 (-want +got):\n%s", diff)
	}
	var pages []string
	for _, r := range fake.Requests() {
		if strings.Contains(r, "/pulls/1/") {
			pages = append(pages, r)
		}
	}
	wantPages := []string{
		"GET /repos/octo/hello/pulls/1/files?page=1&per_page=100",
		"GET /repos/octo/hello/pulls/1/files?page=2&per_page=100",
		"GET /repos/octo/hello/pulls/1/files?page=3&per_page=100",
	}
	if diff := cmp.Diff(wantPages, pages); diff != "" {
		t.Errorf("requests of pull request 1 (-want +got):\n%s", diff)
	}

	got, err = g.PullRequestFiles(t.Context(), 2, base, full)
	if err != nil || len(got) != 3000 {
		t.Errorf("pull request of 3000 files: got %d files, %v; want 3000", len(got), err)
	}
	got, err = g.PullRequestFiles(t.Context(), 3, base, over)
	if !errors.Is(err, source.ErrTooManyChangedFiles) || got != nil || !strings.Contains(err.Error(), "3001 changed files") {
		t.Errorf("pull request of 3001 files: got %d files, %v; want ErrTooManyChangedFiles naming 3001", len(got), err)
	}
	if _, err := g.PullRequestFiles(t.Context(), 9, base, over); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("unknown pull request: got %v, want ErrNotFound", err)
	}

	// A new branch on GitHub: compare against the default branch.
	got, err = g.MergeBaseFiles(t.Context(), base, small)
	if err != nil || len(got) != 251 {
		t.Errorf("merge base files: got %d, %v; want 251 (249 added, old.txt removed, new.txt added)", len(got), err)
	}
	if _, err := g.MergeBaseFiles(t.Context(), base, over); !errors.Is(err, source.ErrTooManyChangedFiles) {
		t.Errorf("merge base files past the compare cap: got %v, want ErrTooManyChangedFiles", err)
	}
}
