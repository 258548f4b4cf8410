package source_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kici-dev/kici/internal/source"
	"github.com/kici-dev/kici/internal/source/githubfake"
)

const (
	fakeRepo  = "octo/hello"
	fakeToken = "ghs_faketoken"
)

// fakeGitHub is the fake API serving the test repository.
type fakeGitHub struct {
	*githubfake.Server
	c1, c2, c3 string
}

func newFake(t *testing.T) *fakeGitHub {
	t.Helper()
	s := githubfake.New(fakeToken)
	t.Cleanup(s.Close)
	f := &fakeGitHub{Server: s}
	f.c1 = s.AddCommit(fakeRepo, tree1)
	f.c2 = s.AddCommit(fakeRepo, tree2)
	f.c3 = s.AddCommit(fakeRepo, tree3)
	s.SetBranch(fakeRepo, "main", f.c2)
	s.SetBranch(fakeRepo, "feature/x", f.c1)
	s.SetBranch(fakeRepo, "bare", f.c3)
	s.SetTag(fakeRepo, "v1", f.c1)
	return f
}

func TestGitHubErrors(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	limited := newFake(t)
	limited.SetRateLimited(true)
	for _, tc := range []struct {
		name  string
		src   *source.GitHub
		call  func(g *source.GitHub) error
		want  error
		words []string
	}{
		{name: "bad token", src: &source.GitHub{Repo: fakeRepo, Token: "wrong", APIBaseURL: fake.URL},
			call: func(g *source.GitHub) error { _, err := g.Resolve(t.Context(), "main"); return err },
			want: source.ErrUnauthorized, words: []string{`"octo/hello"`, `commit for ref "main"`, "401", "Bad credentials", "token"}},
		{name: "no token", src: &source.GitHub{Repo: fakeRepo, APIBaseURL: fake.URL},
			call: func(g *source.GitHub) error { _, _, err := g.Workflows(t.Context(), fake.c2); return err },
			want: source.ErrUnauthorized, words: []string{".kici/workflows at " + fake.c2[:12], "401"}},
		{name: "unknown repo", src: &source.GitHub{Repo: "octo/missing", Token: fakeToken, APIBaseURL: fake.URL},
			call: func(g *source.GitHub) error { _, err := g.Resolve(t.Context(), "main"); return err },
			want: source.ErrNotFound, words: []string{`"octo/missing"`, "404"}},
		{name: "unknown repo, workflows", src: &source.GitHub{Repo: "octo/missing", Token: fakeToken, APIBaseURL: fake.URL},
			call: func(g *source.GitHub) error { _, _, err := g.Workflows(t.Context(), fake.c2); return err },
			want: source.ErrNotFound, words: []string{`"octo/missing"`}},
		{name: "unknown commit, archive", src: &source.GitHub{Repo: fakeRepo, Token: fakeToken, APIBaseURL: fake.URL},
			call: func(g *source.GitHub) error {
				return g.Archive(t.Context(), strings.Repeat("ab", 20), &bytes.Buffer{})
			},
			want: source.ErrNotFound, words: []string{"tarball of abababababab"}},
		{name: "rate limited", src: &source.GitHub{Repo: fakeRepo, Token: fakeToken, APIBaseURL: limited.URL},
			call: func(g *source.GitHub) error {
				_, err := g.ChangedFiles(t.Context(), limited.c1, limited.c2)
				return err
			},
			want: source.ErrRateLimited, words: []string{"comparison", "403", "rate limited until"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call(tc.src)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
			var ae *source.APIError
			if !errors.As(err, &ae) {
				t.Errorf("got %T, want an *APIError", err)
			} else if tc.want == source.ErrRateLimited && ae.RateLimitReset.IsZero() {
				t.Errorf("got no rate-limit reset time, want X-RateLimit-Reset's")
			}
		})
	}
}

func TestGitHubChangedFilesOverTheCap(t *testing.T) {
	t.Parallel()
	fake := githubfake.New(fakeToken)
	defer fake.Close()
	before := fake.AddCommit(fakeRepo, map[string]string{"a": "1"})
	many := map[string]string{}
	for i := range 301 {
		many[fmt.Sprintf("f%03d", i)] = "x"
	}
	after := fake.AddCommit(fakeRepo, many)
	g := &source.GitHub{Repo: fakeRepo, Token: fakeToken, APIBaseURL: fake.URL}
	got, err := g.ChangedFiles(t.Context(), before, after)
	if err != nil {
		t.Fatalf("changed files: %v", err)
	}
	if got != nil {
		t.Errorf("got %d files, want nil (unknown) at GitHub's cap", len(got))
	}
}

func TestGitHubRequests(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	g := &source.GitHub{Repo: fakeRepo, Token: fakeToken, APIBaseURL: fake.URL + "/"}
	if _, _, err := g.Workflows(t.Context(), fake.c1); err != nil {
		t.Fatalf("workflows: %v", err)
	}
	want := []string{
		"GET /repos/octo/hello/contents/.kici/workflows?ref=" + fake.c1,
		"GET /repos/octo/hello/contents/.kici/workflows/ci.yml?ref=" + fake.c1,
		"GET /repos/octo/hello/contents/.kici/kici.lock.json?ref=" + fake.c1,
	}
	got := fake.Requests()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
