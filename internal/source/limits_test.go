package source_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/source/githubfake"
	"github.com/kici-dev/kici/internal/workflow"
)

// TestTooManyWorkflowFiles checks that every kind of source refuses a
// commit of more than workflow.MaxFiles workflow files, and that GitHub's
// is refused from the listing, before a file is fetched.
func TestTooManyWorkflowFiles(t *testing.T) {
	t.Parallel()
	tree := map[string]string{}
	for i := range workflow.MaxFiles + 1 {
		tree[fmt.Sprintf("%s/w%03d.yml", workflow.WorkflowsDir, i)] = ciV1
	}
	dir := filepath.Join(t.TempDir(), "origin")
	gitT(t, t.TempDir(), "init", "-q", "-b", "main", dir)
	sha := commitTree(t, dir, tree, "many")
	fake := githubfake.New(fakeToken)
	t.Cleanup(fake.Close)
	ghSHA := fake.AddCommit(fakeRepo, tree)
	tests := []struct {
		name string
		src  source.Source
		sha  string
	}{
		{name: "local", src: &source.Local{Path: dir}, sha: sha},
		{name: "git", src: &source.Git{URL: "file://" + dir, CacheDir: filepath.Join(t.TempDir(), "mirror.git")}, sha: sha},
		{name: "github", src: &source.GitHub{Repo: fakeRepo, Token: fakeToken, APIBaseURL: fake.URL}, sha: ghSHA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files, _, err := tt.src.Workflows(t.Context(), tt.sha)
			if !errors.Is(err, workflow.ErrTooManyFiles) {
				t.Fatalf("got %d files and error %v, want ErrTooManyFiles", len(files), err)
			}
		})
	}
	t.Run("github fetches no file", func(t *testing.T) {
		t.Parallel()
		f := githubfake.New(fakeToken)
		t.Cleanup(f.Close)
		c := f.AddCommit(fakeRepo, tree)
		g := &source.GitHub{Repo: fakeRepo, Token: fakeToken, APIBaseURL: f.URL}
		if _, _, err := g.Workflows(t.Context(), c); !errors.Is(err, workflow.ErrTooManyFiles) {
			t.Fatalf("got %v, want ErrTooManyFiles", err)
		}
		if reqs := f.Requests(); len(reqs) != 1 {
			t.Errorf("got %d requests %q, want only the listing", len(reqs), reqs)
		}
	})
}
