package api_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/orchestrator"
)

func TestSourcesCreateListDelete(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		notRepo := t.TempDir()
		tests := []struct {
			name       string
			in         apiv1.Source
			wantStatus int
			wantError  string // a part of the error; "" for 201
			want       apiv1.Source
		}{
			{
				name:       "local",
				in:         apiv1.Source{Name: "local-1", Kind: "local", Path: dir, WebhookSecret: "never-returned-secret"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: "local-1", Kind: "local", Path: dir, ForkPullRequests: "approve"},
			},
			{
				name:       "local with an unclean path",
				in:         apiv1.Source{Name: "local-2", Kind: "local", Path: dir + "/./"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: "local-2", Kind: "local", Path: dir, ForkPullRequests: "approve"},
			},
			{
				name:       "git",
				in:         apiv1.Source{Name: "git.1", Kind: "git", URL: "https://example.com/hello.git"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: "git.1", Kind: "git", URL: "https://example.com/hello.git", ForkPullRequests: "approve"},
			},
			{
				name: "git over file://", in: apiv1.Source{Name: "git.2", Kind: "git", URL: "file://" + dir},
				wantStatus: http.StatusBadRequest, wantError: "add it as a local source",
			},
			{
				name: "git over FILE://", in: apiv1.Source{Name: "git.4", Kind: "git", URL: "FILE://" + dir},
				wantStatus: http.StatusBadRequest, wantError: "add it as a local source",
			},
			{
				name:       "git scp-like",
				in:         apiv1.Source{Name: "git.3", Kind: "git", URL: "git@example.com:o/r.git"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: "git.3", Kind: "git", URL: "git@example.com:o/r.git", ForkPullRequests: "approve"},
			},
			{
				name:       "github",
				in:         apiv1.Source{Name: "gh_1", Kind: "github", Repo: "octo-org/hello"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: "gh_1", Kind: "github", Repo: "octo-org/hello", ForkPullRequests: "approve"},
			},
			{
				name:       "longest name",
				in:         apiv1.Source{Name: strings.Repeat("n", 63), Kind: "github", Repo: "octo-org/hello"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: strings.Repeat("n", 63), Kind: "github", Repo: "octo-org/hello", ForkPullRequests: "approve"},
			},
			{
				name:       "fork pull requests run",
				in:         apiv1.Source{Name: "gh-run", Kind: "github", Repo: "octo-org/hello", ForkPullRequests: "run"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: "gh-run", Kind: "github", Repo: "octo-org/hello", ForkPullRequests: "run"},
			},
			{
				name:       "local mirroring a GitHub repository",
				in:         apiv1.Source{Name: "mirror-1", Kind: "local", Path: dir, GitHubRepo: "octo-org/hello"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: "mirror-1", Kind: "local", Path: dir, GitHubRepo: "octo-org/hello", ForkPullRequests: "approve"},
			},
			{
				name:       "git mirroring a GitHub repository",
				in:         apiv1.Source{Name: "mirror-2", Kind: "git", URL: "https://example.com/hello.git", GitHubRepo: "octo-org/hello.go"},
				wantStatus: http.StatusCreated,
				want:       apiv1.Source{Name: "mirror-2", Kind: "git", URL: "https://example.com/hello.git", GitHubRepo: "octo-org/hello.go", ForkPullRequests: "approve"},
			},
			{name: "github_repo not OWNER/NAME", in: apiv1.Source{Name: "mirror-3", Kind: "local", Path: dir, GitHubRepo: "octo-org"}, wantStatus: http.StatusBadRequest, wantError: `github_repo "octo-org": want OWNER/NAME`},
			{name: "github_repo with a path", in: apiv1.Source{Name: "mirror-4", Kind: "git", URL: "https://example.com/hello.git", GitHubRepo: "o/r/../x"}, wantStatus: http.StatusBadRequest, wantError: `github_repo "o/r/../x": want OWNER/NAME`},
			{name: "github_repo on a github source", in: apiv1.Source{Name: "mirror-5", Kind: "github", Repo: "octo-org/hello", GitHubRepo: "octo-org/other"}, wantStatus: http.StatusBadRequest, wantError: "github_repo is for local and git sources"},
			{name: "unknown fork policy", in: apiv1.Source{Name: "gh-bad", Kind: "github", Repo: "octo-org/hello", ForkPullRequests: "yes"}, wantStatus: http.StatusBadRequest, wantError: `fork_pull_requests "yes": want approve, run or ignore`},
			{name: "empty name", in: apiv1.Source{Kind: "local", Path: dir}, wantStatus: http.StatusBadRequest, wantError: `source name ""`},
			{name: "upper-case name", in: apiv1.Source{Name: "Hello", Kind: "local", Path: dir}, wantStatus: http.StatusBadRequest, wantError: `source name "Hello"`},
			{name: "name with a slash", in: apiv1.Source{Name: "a/b", Kind: "local", Path: dir}, wantStatus: http.StatusBadRequest, wantError: `source name "a/b"`},
			{name: "name starting with a dash", in: apiv1.Source{Name: "-a", Kind: "local", Path: dir}, wantStatus: http.StatusBadRequest, wantError: `source name "-a"`},
			{name: "name of 64", in: apiv1.Source{Name: strings.Repeat("n", 64), Kind: "local", Path: dir}, wantStatus: http.StatusBadRequest, wantError: "source name"},
			{name: "no kind", in: apiv1.Source{Name: "k1", Path: dir}, wantStatus: http.StatusBadRequest, wantError: `kind "": want local, git or github`},
			{name: "unknown kind", in: apiv1.Source{Name: "k2", Kind: "svn", URL: "svn://x"}, wantStatus: http.StatusBadRequest, wantError: `kind "svn": want local, git or github`},
			{name: "local without path", in: apiv1.Source{Name: "p1", Kind: "local"}, wantStatus: http.StatusBadRequest, wantError: `a local source needs "path"`},
			{name: "local path not a repository", in: apiv1.Source{Name: "p2", Kind: "local", Path: notRepo}, wantStatus: http.StatusBadRequest, wantError: "is not a git repository"},
			{name: "local path missing", in: apiv1.Source{Name: "p3", Kind: "local", Path: filepath.Join(notRepo, "missing")}, wantStatus: http.StatusBadRequest, wantError: "is not a git repository"},
			{name: "git without url", in: apiv1.Source{Name: "u1", Kind: "git"}, wantStatus: http.StatusBadRequest, wantError: `a git source needs "url"`},
			// Refused at registration by the same check that refuses them
			// when the source is read.
			{name: "git ext transport", in: apiv1.Source{Name: "u2", Kind: "git", URL: "ext::sh -c touch% /tmp/pwned"}, wantStatus: http.StatusBadRequest, wantError: `url: "ext::sh -c touch% /tmp/pwned": transport:: URLs are not allowed`},
			{name: "git option", in: apiv1.Source{Name: "u3", Kind: "git", URL: "--upload-pack=touch /tmp/pwned"}, wantStatus: http.StatusBadRequest, wantError: `url: "--upload-pack=touch /tmp/pwned" starts with "-"`},
			{name: "git plain path", in: apiv1.Source{Name: "u4", Kind: "git", URL: "/srv/repo.git"}, wantStatus: http.StatusBadRequest, wantError: `url: "/srv/repo.git" is neither a URL nor [user@]host:path`},
			{name: "git unknown scheme", in: apiv1.Source{Name: "u5", Kind: "git", URL: "gopher://example.com/r"}, wantStatus: http.StatusBadRequest, wantError: `url: "gopher://example.com/r": scheme "gopher"`},
			{name: "git url with a space", in: apiv1.Source{Name: "u6", Kind: "git", URL: "https://example.com/a b"}, wantStatus: http.StatusBadRequest, wantError: "holds a space or control character"},
			{name: "git url too long", in: apiv1.Source{Name: "u7", Kind: "git", URL: "https://example.com/" + strings.Repeat("a", 5000)}, wantStatus: http.StatusBadRequest, wantError: "url: 5020 bytes, want at most 4096"},
			{name: "github without repo", in: apiv1.Source{Name: "r1", Kind: "github"}, wantStatus: http.StatusBadRequest, wantError: "OWNER/NAME"},
			{name: "github repo without owner", in: apiv1.Source{Name: "r2", Kind: "github", Repo: "hello"}, wantStatus: http.StatusBadRequest, wantError: "OWNER/NAME"},
			{name: "github repo too deep", in: apiv1.Source{Name: "r3", Kind: "github", Repo: "a/b/c"}, wantStatus: http.StatusBadRequest, wantError: "OWNER/NAME"},
			{name: "github repo with empty name", in: apiv1.Source{Name: "r4", Kind: "github", Repo: "octo-org/"}, wantStatus: http.StatusBadRequest, wantError: "OWNER/NAME"},
			{name: "github repo with empty owner", in: apiv1.Source{Name: "r5", Kind: "github", Repo: "/hello"}, wantStatus: http.StatusBadRequest, wantError: "OWNER/NAME"},
			{name: "github repo with a space", in: apiv1.Source{Name: "r6", Kind: "github", Repo: "octo org/hello"}, wantStatus: http.StatusBadRequest, wantError: "OWNER/NAME"},
		}
		// The group returns once its parallel subtests are done.
		t.Run("create", func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					resp := h.admin(t, http.MethodPost, "/api/v1/sources", tt.in)
					if resp.status != tt.wantStatus {
						t.Fatalf("got status %d (%s), want %d", resp.status, resp.body, tt.wantStatus)
					}
					if tt.wantError != "" {
						if got := resp.apiError(t).Error; !strings.Contains(got, tt.wantError) {
							t.Errorf("got error %q, want it to contain %q", got, tt.wantError)
						}
						return
					}
					if tt.in.WebhookSecret != "" && strings.Contains(string(resp.body), tt.in.WebhookSecret) {
						t.Errorf("got the webhook secret back in %s, want it never returned", resp.body)
					}
					var got apiv1.Source
					resp.decode(t, &got)
					if got.CreatedAt.IsZero() {
						t.Errorf("got no created_at, want one")
					}
					if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(apiv1.Source{}, "CreatedAt")); diff != "" {
						t.Errorf("created source mismatch (-want +got):\n%s", diff)
					}
				})
			}
		})

		var want []apiv1.Source
		for _, tt := range tests {
			if tt.wantStatus == http.StatusCreated {
				want = append(want, tt.want)
			}
		}
		var list apiv1.SourceList
		h.mustAdmin(t, http.MethodGet, "/api/v1/sources", nil, http.StatusOK, &list)
		sortByName := cmpopts.SortSlices(func(a, b apiv1.Source) bool { return a.Name < b.Name })
		if diff := cmp.Diff(want, list.Sources, sortByName, cmpopts.IgnoreFields(apiv1.Source{}, "CreatedAt")); diff != "" {
			t.Errorf("listed sources mismatch (-want +got):\n%s", diff)
		}

		t.Run("duplicate", func(t *testing.T) {
			resp := h.admin(t, http.MethodPost, "/api/v1/sources", apiv1.Source{Name: "local-1", Kind: "git", URL: "https://example.com/other.git"})
			if resp.status != http.StatusConflict {
				t.Fatalf("got status %d (%s), want 409", resp.status, resp.body)
			}
			if got, want := resp.apiError(t).Error, `source "local-1": already exists`; got != want {
				t.Errorf("got error %q, want %q", got, want)
			}
		})

		t.Run("delete", func(t *testing.T) {
			h.mustAdmin(t, http.MethodDelete, "/api/v1/sources/git.1", nil, http.StatusNoContent, nil)
			resp := h.admin(t, http.MethodDelete, "/api/v1/sources/git.1", nil)
			if resp.status != http.StatusNotFound {
				t.Fatalf("delete again: got status %d (%s), want 404", resp.status, resp.body)
			}
			if got, want := resp.apiError(t).Error, `source "git.1": not found`; got != want {
				t.Errorf("got error %q, want %q", got, want)
			}
			var list apiv1.SourceList
			h.mustAdmin(t, http.MethodGet, "/api/v1/sources", nil, http.StatusOK, &list)
			for _, s := range list.Sources {
				if s.Name == "git.1" {
					t.Errorf("got git.1 listed after its deletion")
				}
			}
			// The name is free again.
			h.mustAdmin(t, http.MethodPost, "/api/v1/sources", apiv1.Source{Name: "git.1", Kind: "local", Path: dir}, http.StatusCreated, nil)
		})

		t.Run("delete unknown", func(t *testing.T) {
			resp := h.admin(t, http.MethodDelete, "/api/v1/sources/no-such-source", nil)
			if resp.status != http.StatusNotFound {
				t.Fatalf("got status %d (%s), want 404", resp.status, resp.body)
			}
		})
	})
}

// TestFileGitURLNeedsTheSetting: with KICI_GIT_ALLOW_FILE_URLS=true a git
// source may name a repository on the orchestrator's disk by file:// URL.
func TestFileGitURLNeedsTheSetting(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) { c.AllowFileGitURLs = true }, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		resp := h.admin(t, http.MethodPost, "/api/v1/sources", apiv1.Source{Name: "ondisk", Kind: "git", URL: "file://" + dir})
		if resp.status != http.StatusCreated {
			t.Fatalf("git source over file:// with the setting on: got %d (%s), want 201", resp.status, resp.body)
		}
	})
}
