package source_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/workflow"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, f fixture) {
		for _, tc := range []struct {
			name, ref, want string
		}{
			{name: "branch", ref: "main", want: f.c2},
			{name: "full branch ref", ref: "refs/heads/main", want: f.c2},
			{name: "branch with a slash", ref: "feature/x", want: f.c1},
			{name: "other branch", ref: "bare", want: f.c3},
			{name: "tag", ref: "v1", want: f.c1},
			{name: "full tag ref", ref: "refs/tags/v1", want: f.c1},
			{name: "sha", ref: f.c1, want: f.c1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				got, err := f.src.Resolve(t.Context(), tc.ref)
				if err != nil {
					t.Fatalf("resolve %q: %v", tc.ref, err)
				}
				if got != tc.want {
					t.Errorf("resolve %q: got %s, want %s", tc.ref, got, tc.want)
				}
			})
		}
		for _, ref := range []string{"nope", "refs/heads/nope", "0123456789012345678901234567890123456789"} {
			if _, err := f.src.Resolve(t.Context(), ref); !errors.Is(err, source.ErrNotFound) {
				t.Errorf("resolve %q: got %v, want ErrNotFound", ref, err)
			}
		}
	})
}

func TestWorkflows(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, f fixture) {
		for _, tc := range []struct {
			name  string
			sha   string
			files map[string]string
			lock  []byte
		}{
			{name: "first commit, no lock", sha: f.c1, files: map[string]string{".kici/workflows/ci.yml": ciV1}},
			{name: "second commit, lock", sha: f.c2, files: map[string]string{
				".kici/workflows/ci.yml": ciV2, ".kici/workflows/deploy.yaml": dep,
			}, lock: []byte(lock)},
			{name: "no workflows", sha: f.c3, files: map[string]string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				files, gotLock, err := f.src.Workflows(t.Context(), tc.sha)
				if err != nil {
					t.Fatalf("workflows: %v", err)
				}
				if files == nil {
					t.Errorf("got nil files, want a non-nil list")
				}
				if diff := cmp.Diff(tc.files, fileMap(files)); diff != "" {
					t.Errorf("workflow files (-want +got):\n%s", diff)
				}
				for _, p := range paths(files) {
					if !workflow.IsWorkflowFile(p) {
						t.Errorf("got %q, which is not a workflow file", p)
					}
				}
				if !bytes.Equal(gotLock, tc.lock) || (tc.lock == nil) != (gotLock == nil) {
					t.Errorf("got lock %q, want %q", gotLock, tc.lock)
				}
			})
		}
		// The files come sorted by path, and compile.
		files, _, err := f.src.Workflows(t.Context(), f.c2)
		if err != nil {
			t.Fatalf("workflows: %v", err)
		}
		if diff := cmp.Diff([]string{".kici/workflows/ci.yml", ".kici/workflows/deploy.yaml"}, paths(files)); diff != "" {
			t.Errorf("order (-want +got):\n%s", diff)
		}
		if _, err := workflow.Compile(files); err != nil {
			t.Errorf("compile: %v", err)
		}
		unknown := "0123456789012345678901234567890123456789"
		if _, _, err := f.src.Workflows(t.Context(), unknown); !errors.Is(err, source.ErrNotFound) {
			t.Errorf("workflows of an unknown commit: got %v, want ErrNotFound", err)
		}
	})
}

func TestArchive(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, f fixture) {
		for _, tc := range []struct {
			name string
			sha  string
			tree map[string]string
		}{
			{name: "first", sha: f.c1, tree: tree1},
			{name: "second", sha: f.c2, tree: tree2},
			{name: "third", sha: f.c3, tree: tree3},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var buf bytes.Buffer
				if err := f.src.Archive(t.Context(), tc.sha, &buf); err != nil {
					t.Fatalf("archive: %v", err)
				}
				if diff := cmp.Diff(tc.tree, untar(t, buf.Bytes())); diff != "" {
					t.Errorf("archive tree (-want +got):\n%s", diff)
				}
			})
		}
	})
}

func TestChangedFiles(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, f fixture) {
		zero := "0000000000000000000000000000000000000000"
		for _, tc := range []struct {
			name          string
			before, after string
			want          []string
		}{
			{name: "two commits", before: f.c1, after: f.c2, want: changed12},
			{name: "same commit", before: f.c2, after: f.c2, want: []string{}},
			{name: "to a tree without workflows", before: f.c2, after: f.c3, want: []string{
				workflow.LockPath, ".kici/workflows/.hidden.yml", ".kici/workflows/ci.yml", ".kici/workflows/deploy.yaml",
				".kici/workflows/notes.txt", ".kici/workflows/sub/nested.yml", "README.md", "docs/guide.md", "src/main.go",
			}},
			{name: "empty before", before: "", after: f.c2, want: nil},
			{name: "all-zero before", before: zero, after: f.c2, want: nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				got, err := f.src.ChangedFiles(t.Context(), tc.before, tc.after)
				if err != nil {
					t.Fatalf("changed files: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("changed files (-want +got):\n%s", diff)
				}
				if (tc.want == nil) != (got == nil) {
					t.Errorf("got nil %v, want nil %v (nil means unknown)", got == nil, tc.want == nil)
				}
			})
		}
	})
}

func TestRefsThatCouldBeOptionsRefused(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, f fixture) {
		ctx := t.Context()
		out := filepath.Join(t.TempDir(), "written")
		for _, ref := range []string{"-h", "--upload-pack=touch " + out, "--output=" + out, "", "main branch", "a\nb", "a\\b"} {
			if _, err := f.src.Resolve(ctx, ref); !errors.Is(err, source.ErrInvalidRef) {
				t.Errorf("resolve %q: got %v, want ErrInvalidRef", ref, err)
			}
		}
		for _, sha := range []string{"--output=" + out, "-" + f.c1[1:], "main", f.c1[:12], f.c1 + "^{tree}"} {
			if _, _, err := f.src.Workflows(ctx, sha); !errors.Is(err, source.ErrInvalidRef) {
				t.Errorf("workflows %q: got %v, want ErrInvalidRef", sha, err)
			}
			if err := f.src.Archive(ctx, sha, &bytes.Buffer{}); !errors.Is(err, source.ErrInvalidRef) {
				t.Errorf("archive %q: got %v, want ErrInvalidRef", sha, err)
			}
			if _, err := f.src.ChangedFiles(ctx, sha, f.c2); !errors.Is(err, source.ErrInvalidRef) {
				t.Errorf("changed files from %q: got %v, want ErrInvalidRef", sha, err)
			}
			if _, err := f.src.ChangedFiles(ctx, f.c1, sha); !errors.Is(err, source.ErrInvalidRef) {
				t.Errorf("changed files to %q: got %v, want ErrInvalidRef", sha, err)
			}
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused ref wrote %s: %v", out, err)
		}
	})
}

func TestCloneURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		src       source.Source
		url       string
		masks     []string
		wantEmpty bool
	}{
		{name: "local", src: &source.Local{Path: "/srv/repo"}},
		{name: "git", src: &source.Git{URL: "https://u:secret@example.com/r.git", CacheDir: "/tmp/x"}},
		{name: "github", src: &source.GitHub{Repo: "octo/hello", Token: "ghs_abc"},
			url: "https://x-access-token:ghs_abc@github.com/octo/hello.git", masks: []string{"ghs_abc"}},
		{name: "github without token", src: &source.GitHub{Repo: "octo/hello"}, url: "https://github.com/octo/hello.git"},
		{name: "github enterprise", src: &source.GitHub{Repo: "octo/hello", Token: "t", APIBaseURL: "https://ghe.example.com/api/v3"},
			url: "https://x-access-token:t@ghe.example.com/octo/hello.git", masks: []string{"t"}},
		{name: "explicit clone base", src: &source.GitHub{Repo: "octo/hello", CloneBaseURL: "https://git.example.com/"},
			url: "https://git.example.com/octo/hello.git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, masks := tc.src.CloneURL()
			if url != tc.url {
				t.Errorf("got URL %q, want %q", url, tc.url)
			}
			if diff := cmp.Diff(tc.masks, masks); diff != "" {
				t.Errorf("masks (-want +got):\n%s", diff)
			}
		})
	}
}
