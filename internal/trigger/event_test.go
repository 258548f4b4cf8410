package trigger

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConstructors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  Event
		want Event
	}{
		{
			name: "push to full branch ref",
			got:  PushEvent("refs/heads/main", shaA),
			want: Event{Kind: KindPush, Provider: ProviderManual, Ref: "refs/heads/main", Branch: "main", SHA: shaA},
		},
		{
			name: "push to short branch name",
			got:  PushEvent("release/1.0", ""),
			want: Event{Kind: KindPush, Provider: ProviderManual, Ref: "refs/heads/release/1.0", Branch: "release/1.0"},
		},
		{
			name: "push of a tag ref is a tag event",
			got:  PushEvent("refs/tags/v1.0", shaB),
			want: Event{Kind: KindTag, Provider: ProviderManual, Ref: "refs/tags/v1.0", Tag: "v1.0", SHA: shaB},
		},
		{
			name: "tag by name",
			got:  TagEvent("v2", ""),
			want: Event{Kind: KindTag, Provider: ProviderManual, Ref: "refs/tags/v2", Tag: "v2"},
		},
		{
			name: "tag by ref",
			got:  TagEvent("refs/tags/v2", shaC),
			want: Event{Kind: KindTag, Provider: ProviderManual, Ref: "refs/tags/v2", Tag: "v2", SHA: shaC},
		},
		{
			name: "pull request defaults to opened",
			got:  PullRequestEvent("refs/heads/main", "feature", ""),
			want: Event{
				Kind: KindPullRequest, Provider: ProviderManual, Branch: "main", BaseBranch: "main",
				HeadBranch: "feature", Action: "opened",
			},
		},
		{
			name: "manual on default branch",
			got:  ManualEvent("", map[string]string{"env": "prod"}),
			want: Event{Kind: KindManual, Provider: ProviderManual, Inputs: map[string]string{"env": "prod"}},
		},
		{
			name: "manual on a tag",
			got:  ManualEvent("refs/tags/v1", nil),
			want: Event{Kind: KindManual, Provider: ProviderManual, Ref: "refs/tags/v1", Tag: "v1"},
		},
		{
			name: "schedule",
			got:  ScheduleEvent("0 3 * * *", "main", time.Time{}),
			want: Event{Kind: KindSchedule, Provider: ProviderSchedule, Cron: "0 3 * * *", Ref: "refs/heads/main", Branch: "main"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("Event mismatch (-want +got):\n%s", diff)
			}
			if err := tt.got.Validate(); err != nil {
				t.Errorf("got invalid event: %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ev      Event
		wantErr string
	}{
		{name: "empty kind", ev: Event{}, wantErr: "event kind is empty"},
		{name: "unknown kind", ev: Event{Kind: "issue"}, wantErr: `unknown event kind "issue"`},
		{
			name:    "branch disagrees with ref",
			ev:      Event{Kind: KindPush, Ref: "refs/heads/main", Branch: "dev"},
			wantErr: `ref "refs/heads/main" does not agree with branch "dev" and tag ""`,
		},
		{
			name:    "tag set on a branch ref",
			ev:      Event{Kind: KindManual, Ref: "refs/heads/main", Branch: "main", Tag: "main"},
			wantErr: `ref "refs/heads/main" does not agree with branch "main" and tag "main"`,
		},
		{name: "push to a tag", ev: PushEvent("refs/tags/v1", "").withKind(KindPush), wantErr: `push event: ref "refs/tags/v1" is not a branch`},
		{name: "push to other ref", ev: PushEvent("refs/notes/x", ""), wantErr: `push event: ref "refs/notes/x" is not a branch`},
		{name: "tag on a branch", ev: PushEvent("main", "").withKind(KindTag), wantErr: `tag event: ref "refs/heads/main" is not a tag`},
		{
			name:    "create of other ref",
			ev:      Event{Kind: KindCreate, Ref: "refs/notes/x"},
			wantErr: `create event: ref "refs/notes/x" is neither a branch nor a tag`,
		},
		{
			name:    "pull request without base",
			ev:      Event{Kind: KindPullRequest, Branch: "main"},
			wantErr: "pull_request event without base branch",
		},
		{
			name:    "pull request branch is not the base",
			ev:      Event{Kind: KindPullRequest, Branch: "feature", BaseBranch: "main"},
			wantErr: `pull_request event: branch "feature", tag "", want branch "main" (the base branch) and no tag`,
		},
		{
			name:    "pull request ref not a pull ref",
			ev:      Event{Kind: KindPullRequest, Ref: "refs/heads/main", Branch: "main", BaseBranch: "main"},
			wantErr: `pull_request event: ref "refs/heads/main" is not under refs/pull/`,
		},
		{
			name:    "changed files while unknown",
			ev:      Event{Kind: KindManual, ChangedFiles: []string{"a"}},
			wantErr: "changed files listed but changed_files_known is false",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.ev.Validate()
			if err == nil {
				t.Fatalf("got no error, want %q", tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("got error %q, want %q", err, tt.wantErr)
			}
		})
	}
}

func (ev Event) withKind(kind string) Event {
	ev.Kind = kind
	return ev
}

// TestEventJSON pins the JSON field names that `kici preview -o json` and
// the run record show.
func TestEventJSON(t *testing.T) {
	t.Parallel()
	ev := githubEvent(t, "pull_request", "pull_request_synchronize_fork.json")
	ev.ChangedFiles, ev.ChangedFilesKnown = []string{"a.go"}, true
	ev.Inputs = map[string]string{"k": "v"}
	ev.Cron = "* * * * *"
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	want := map[string]any{
		"kind": "pull_request", "provider": "github", "repo": "octo-org/hello", "ref": "refs/pull/43/head",
		"branch": "main", "sha": shaC, "before": shaB, "base_sha": shaA, "number": float64(43), "base_branch": "main",
		"head_branch": "patch-1", "head_repo": "hubot/hello", "action": "synchronize", "fork": true, "changed_files": []any{"a.go"},
		"changed_files_known": true, "actor": "hubot", "inputs": map[string]any{"k": "v"}, "cron": "* * * * *",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON mismatch (-want +got):\n%s", diff)
	}
}
