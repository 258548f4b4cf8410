package trigger

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	shaA = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
	shaB = "2f9d5a0e1c3b4d5e6f708192a3b4c5d6e7f80912"
	shaC = "9b1e0c7d3a2f4e5d6c7b8a9012345678abcdef01"
	shaD = "0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6a7b8c9d0"
)

// fixture reads testdata/github/<name>.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "github", name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return body
}

// githubEvent normalises a fixture that must normalise.
func githubEvent(t testing.TB, kind, name string) Event {
	t.Helper()
	ev, err := NormalizeGitHub(kind, fixture(t, name))
	if err != nil {
		t.Fatalf("NormalizeGitHub(%q, %s): %v", kind, name, err)
	}
	return ev
}

func TestNormalizeGitHubFixtures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		kind        string
		file        string
		want        Event
		wantIgnored *IgnoredError
	}{
		{
			name: "push to branch",
			kind: "push",
			file: "push_branch.json",
			want: Event{
				Kind: KindPush, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/heads/main", Branch: "main", SHA: shaB, Before: shaA,
				ChangedFiles: []string{"README.md", "src/main.go"}, ChangedFilesKnown: true,
				Actor: "mona",
			},
		},
		{
			name: "push with several commits unions their files",
			kind: "push",
			file: "push_commits.json",
			want: Event{
				Kind: KindPush, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/heads/feature/login", Branch: "feature/login", SHA: shaD, Before: shaB,
				ChangedFiles: []string{
					"docs/login.md", "go.mod", "src/login/form.go", "src/login/form_test.go", "src/old/handler.go",
				},
				ChangedFilesKnown: true,
				Actor:             "mona",
			},
		},
		{
			name: "push touching docs only",
			kind: "push",
			file: "push_docs_only.json",
			want: Event{
				Kind: KindPush, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/heads/main", Branch: "main", SHA: shaC, Before: shaB,
				ChangedFiles: []string{"docs/index.md", "docs/setup.md"}, ChangedFilesKnown: true,
				Actor: "mona",
			},
		},
		{
			name: "tag push",
			kind: "push",
			file: "push_tag.json",
			want: Event{
				Kind: KindTag, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/tags/v1.2.0", Tag: "v1.2.0", SHA: shaB, Before: zeroSHA,
				Actor: "mona",
			},
		},
		{
			name: "new branch has its commits' changed files",
			kind: "push",
			file: "push_new_branch.json",
			want: Event{
				Kind: KindPush, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/heads/release/2.0", Branch: "release/2.0", SHA: shaC, Before: zeroSHA,
				ChangedFiles: []string{"src/version.go"}, ChangedFilesKnown: true,
				Actor: "mona",
			},
		},
		{
			name: "new branch listing no commits has unknown changed files",
			kind: "push",
			file: "push_new_branch_no_commits.json",
			want: Event{
				Kind: KindPush, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/heads/release/2.1", Branch: "release/2.1", SHA: shaC, Before: zeroSHA,
				Actor: "mona",
			},
		},
		{
			name:        "branch deletion is ignored",
			kind:        "push",
			file:        "push_branch_deleted.json",
			wantIgnored: &IgnoredError{Kind: "push", Reason: "branch deleted"},
		},
		{
			name:        "tag deletion is ignored",
			kind:        "push",
			file:        "push_tag_deleted.json",
			wantIgnored: &IgnoredError{Kind: "push", Reason: "tag deleted"},
		},
		{
			name: "pull request opened from the same repository",
			kind: "pull_request",
			file: "pull_request_opened.json",
			want: Event{
				Kind: KindPullRequest, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/pull/42/head", Branch: "main", SHA: shaD, Number: 42,
				BaseSHA: shaA, BaseBranch: "main", HeadBranch: "feature/login", Action: "opened",
				HeadRepo: "octo-org/hello", Actor: "mona",
			},
		},
		{
			name: "pull request synchronize from a fork",
			kind: "pull_request",
			file: "pull_request_synchronize_fork.json",
			want: Event{
				Kind: KindPullRequest, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/pull/43/head", Branch: "main", SHA: shaC, Before: shaB, Number: 43,
				BaseSHA: shaA, BaseBranch: "main", HeadBranch: "patch-1", Action: "synchronize", Fork: true,
				HeadRepo: "hubot/hello", Actor: "hubot",
			},
		},
		{
			name: "pull request closed",
			kind: "pull_request",
			file: "pull_request_closed.json",
			want: Event{
				Kind: KindPullRequest, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/pull/42/head", Branch: "main", SHA: shaD, Number: 42,
				BaseSHA: shaA, BaseBranch: "main", HeadBranch: "feature/login", Action: "closed",
				HeadRepo: "octo-org/hello", Actor: "mona",
			},
		},
		{
			name: "pull request from a deleted fork counts as a fork",
			kind: "pull_request",
			file: "pull_request_reopened_deleted_fork.json",
			want: Event{
				Kind: KindPullRequest, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/pull/44/head", Branch: "release/1.0", SHA: shaA, Number: 44,
				BaseSHA: shaA, BaseBranch: "release/1.0", HeadBranch: "patch-2", Action: "reopened", Fork: true,
				Actor: "hubot",
			},
		},
		{
			name: "create branch",
			kind: "create",
			file: "create_branch.json",
			want: Event{
				Kind: KindCreate, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/heads/feature/login", Branch: "feature/login", Actor: "mona",
			},
		},
		{
			name: "create tag",
			kind: "create",
			file: "create_tag.json",
			want: Event{
				Kind: KindCreate, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/tags/v1.2.0", Tag: "v1.2.0", Actor: "mona",
			},
		},
		{
			name: "workflow_dispatch with inputs",
			kind: "workflow_dispatch",
			file: "workflow_dispatch.json",
			want: Event{
				Kind: KindManual, Provider: ProviderGitHub, Repo: "octo-org/hello",
				Ref: "refs/heads/main", Branch: "main", Actor: "mona",
				Inputs: map[string]string{
					"environment": "prod", "debug": "true", "replicas": "3", "extra": `{"a":[1,2]}`,
				},
			},
		},
		{
			name:        "ping is ignored",
			kind:        "ping",
			file:        "ping.json",
			wantIgnored: &IgnoredError{Kind: "ping", Reason: "ping (the webhook is set up)"},
		},
		{
			name:        "unknown kind is ignored",
			kind:        "issues",
			file:        "issues_opened.json",
			wantIgnored: &IgnoredError{Kind: "issues", Reason: `kici does not act on github "issues" events`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NormalizeGitHub(tt.kind, fixture(t, tt.file))
			if tt.wantIgnored != nil {
				var ig *IgnoredError
				if !errors.As(err, &ig) {
					t.Fatalf("got error %v, want an *IgnoredError", err)
				}
				if diff := cmp.Diff(tt.wantIgnored, ig); diff != "" {
					t.Errorf("IgnoredError mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Event mismatch (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("got invalid event: %v", err)
			}
		})
	}
}

func TestNormalizeGitHubErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		kind        string
		body        string
		wantErr     string // the whole message, or a prefix ending in "..."
		wantIgnored bool
	}{
		{name: "empty kind", kind: "", body: `{}`, wantErr: "github delivery: missing event kind (the X-GitHub-Event header)"},
		{name: "push not JSON", kind: "push", body: `ref=main`, wantErr: "github push delivery: decode body: ..."},
		{name: "push JSON array", kind: "push", body: `[]`, wantErr: "github push delivery: decode body: ..."},
		{name: "push empty body", kind: "push", body: ``, wantErr: "github push delivery: decode body: ..."},
		{name: "push trailing garbage", kind: "push", body: `{"ref":"refs/heads/main"} x`, wantErr: "github push delivery: decode body: ..."},
		{name: "push ref of wrong type", kind: "push", body: `{"ref": 5}`, wantErr: "github push delivery: decode body: ..."},
		{name: "push without ref", kind: "push", body: `{"after": "abc"}`, wantErr: `github push delivery: missing "ref"`},
		{name: "push null body", kind: "push", body: `null`, wantErr: `github push delivery: missing "ref"`},
		{name: "push without after", kind: "push", body: `{"ref": "refs/heads/main"}`, wantErr: `github push delivery: missing "after"`},
		{
			name: "push of another ref is ignored", kind: "push", body: `{"ref": "refs/notes/commits", "after": "abc"}`,
			wantIgnored: true,
		},
		{name: "push of empty branch name is ignored", kind: "push", body: `{"ref": "refs/heads/", "after": "abc"}`, wantIgnored: true},
		{name: "push to zero after is ignored", kind: "push", body: `{"ref": "refs/heads/x", "after": "` + zeroSHA + `"}`, wantIgnored: true},
		{name: "pull_request without action", kind: "pull_request", body: `{"number": 1}`, wantErr: `github pull_request delivery: missing "action"`},
		{name: "pull_request without object", kind: "pull_request", body: `{"action": "opened"}`, wantErr: `github pull_request delivery: missing "pull_request"`},
		{
			name: "pull_request without base ref", kind: "pull_request",
			body:    `{"action": "opened", "number": 1, "pull_request": {"head": {"ref": "x", "sha": "abc"}}}`,
			wantErr: `github pull_request delivery: missing "pull_request.base.ref"`,
		},
		{
			name: "pull_request without head ref", kind: "pull_request",
			body:    `{"action": "opened", "number": 1, "pull_request": {"base": {"ref": "main"}, "head": {"sha": "abc"}}}`,
			wantErr: `github pull_request delivery: missing "pull_request.head.ref"`,
		},
		{
			name: "pull_request without head sha", kind: "pull_request",
			body:    `{"action": "opened", "number": 1, "pull_request": {"base": {"ref": "main"}, "head": {"ref": "x"}}}`,
			wantErr: `github pull_request delivery: missing "pull_request.head.sha"`,
		},
		{
			name: "pull_request without number", kind: "pull_request",
			body:    `{"action": "opened", "pull_request": {"base": {"ref": "main"}, "head": {"ref": "x", "sha": "abc"}}}`,
			wantErr: `github pull_request delivery: missing "number"`,
		},
		{
			name: "pull_request with fractional number", kind: "pull_request",
			body:    `{"action": "opened", "number": 1.5}`,
			wantErr: "github pull_request delivery: decode body: ...",
		},
		{name: "create without ref", kind: "create", body: `{"ref_type": "tag"}`, wantErr: `github create delivery: missing "ref"`},
		{name: "create without ref_type", kind: "create", body: `{"ref": "v1"}`, wantErr: `github create delivery: missing "ref_type"`},
		{name: "create of a repository is ignored", kind: "create", body: `{"ref": "x", "ref_type": "repository"}`, wantIgnored: true},
		{name: "workflow_dispatch without ref", kind: "workflow_dispatch", body: `{"inputs": {}}`, wantErr: `github workflow_dispatch delivery: missing "ref"`},
		{
			name: "workflow_dispatch inputs not an object", kind: "workflow_dispatch", body: `{"ref": "main", "inputs": [1]}`,
			wantErr: "github workflow_dispatch delivery: decode body: ...",
		},
		{name: "ping with any body is ignored", kind: "ping", body: `not json`, wantIgnored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev, err := NormalizeGitHub(tt.kind, []byte(tt.body))
			if err == nil {
				t.Fatalf("got event %+v, want an error", ev)
			}
			var ig *IgnoredError
			if got := errors.As(err, &ig); got != tt.wantIgnored {
				t.Fatalf("got ignored %v (%v), want %v", got, err, tt.wantIgnored)
			}
			if tt.wantIgnored {
				return
			}
			checkErrorText(t, err, tt.wantErr)
		})
	}
}

// checkErrorText compares err's text with want: exactly, or by prefix when
// want ends in "...".
func checkErrorText(t *testing.T, err error, want string) {
	t.Helper()
	if prefix, ok := strings.CutSuffix(want, "..."); ok {
		if !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("got error %q, want it to start with %q", err, prefix)
		}
		return
	}
	if err.Error() != want {
		t.Errorf("got error %q, want %q", err, want)
	}
}

func TestNormalizeBodyTooLarge(t *testing.T) {
	t.Parallel()
	body := make([]byte, MaxBodySize+1)
	tests := []struct {
		name string
		norm func([]byte) (Event, error)
	}{
		{name: "github", norm: func(b []byte) (Event, error) { return NormalizeGitHub("push", b) }},
		{name: "github ping", norm: func(b []byte) (Event, error) { return NormalizeGitHub("ping", b) }},
		{name: "generic", norm: NormalizeGeneric},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.norm(body)
			if !errors.Is(err, ErrBodyTooLarge) {
				t.Errorf("got error %v, want ErrBodyTooLarge", err)
			}
		})
	}
}

func TestNormalizeGitHubPushTruncatedCommits(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"ref": "refs/heads/main", "before": "` + shaA + `", "after": "` + shaB + `", "commits": [`)
	for i := range githubMaxCommits {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"modified": ["a.go"]}`)
	}
	b.WriteString(`]}`)
	ev, err := NormalizeGitHub("push", []byte(b.String()))
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	if ev.ChangedFilesKnown || ev.ChangedFiles != nil {
		t.Errorf("got changed files %v (known %v), want unknown for %d commits", ev.ChangedFiles, ev.ChangedFilesKnown, githubMaxCommits)
	}
}

// TestGitHubForkPullRequest checks what a fork's pull request carries for
// the fork policy: the base commit its workflows are read at, the head
// repository, and event.fork / event.number as typed values. A fork's
// pull request without pull_request.base.sha is refused, naming it; the
// same repository's is not (it reads its own head's workflows).
func TestGitHubForkPullRequest(t *testing.T) {
	t.Parallel()
	ev := githubEvent(t, "pull_request", "pull_request_synchronize_fork.json")
	vars := ev.Vars()
	if !ev.Fork || ev.BaseSHA != shaA || ev.HeadRepo != "hubot/hello" || !vars.Fork || vars.Number != 43 {
		t.Errorf("got fork %v base_sha %q head_repo %q, vars fork %v number %d; want true %q %q, true 43",
			ev.Fork, ev.BaseSHA, ev.HeadRepo, vars.Fork, vars.Number, shaA, "hubot/hello")
	}
	noBase := func(name string) []byte {
		var body map[string]any
		if err := json.Unmarshal(fixture(t, name), &body); err != nil {
			t.Fatal(err)
		}
		delete(body["pull_request"].(map[string]any)["base"].(map[string]any), "sha")
		out, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	_, err := NormalizeGitHub("pull_request", noBase("pull_request_synchronize_fork.json"))
	if err == nil || !strings.Contains(err.Error(), "pull_request.base.sha") {
		t.Errorf("fork without base sha: got %v, want an error naming pull_request.base.sha", err)
	}
	if _, err := NormalizeGitHub("pull_request", noBase("pull_request_opened.json")); err != nil {
		t.Errorf("same-repository pull request without base sha: got %v, want none", err)
	}
}
