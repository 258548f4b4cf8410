package trigger

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalizeGeneric(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		body        string
		want        Event
		wantErr     string // the whole message, or a prefix ending in "..."
		wantIgnored *IgnoredError
	}{
		{
			name: "documented example",
			body: `{"ref": "refs/heads/main", "before": "` + shaA + `", "after": "` + shaB + `",
				"repository": "octo-org/hello", "actor": "alice",
				"changed_files": ["src/b.go", "README.md", "src/b.go", ""]}`,
			want: Event{
				Kind: KindPush, Provider: ProviderGeneric, Repo: "octo-org/hello",
				Ref: "refs/heads/main", Branch: "main", SHA: shaB, Before: shaA,
				ChangedFiles: []string{"README.md", "src/b.go"}, ChangedFilesKnown: true,
				Actor: "alice",
			},
		},
		{
			name: "no changed_files means unknown",
			body: `{"ref": "refs/heads/dev", "after": "` + shaB + `"}`,
			want: Event{Kind: KindPush, Provider: ProviderGeneric, Ref: "refs/heads/dev", Branch: "dev", SHA: shaB},
		},
		{
			name: "null changed_files means unknown",
			body: `{"ref": "refs/heads/dev", "after": "` + shaB + `", "changed_files": null}`,
			want: Event{Kind: KindPush, Provider: ProviderGeneric, Ref: "refs/heads/dev", Branch: "dev", SHA: shaB},
		},
		{
			name: "empty changed_files is known and empty",
			body: `{"ref": "refs/heads/dev", "after": "` + shaB + `", "changed_files": []}`,
			want: Event{
				Kind: KindPush, Provider: ProviderGeneric, Ref: "refs/heads/dev", Branch: "dev", SHA: shaB,
				ChangedFiles: []string{}, ChangedFilesKnown: true,
			},
		},
		{
			name: "first push takes the union of its commits' files",
			body: `{"ref": "refs/heads/feat", "before": "` + zeroSHA + `", "after": "` + shaB + `",
				"commits": [{"added": ["README.md"], "modified": ["src/a.go"]}, {"removed": ["old.txt"], "modified": ["src/a.go"]}]}`,
			want: Event{
				Kind: KindPush, Provider: ProviderGeneric, Ref: "refs/heads/feat", Branch: "feat", SHA: shaB, Before: zeroSHA,
				ChangedFiles: []string{"README.md", "old.txt", "src/a.go"}, ChangedFilesKnown: true,
			},
		},
		{
			name: "created with a before of its own is a first push",
			body: `{"ref": "refs/heads/feat", "before": "` + shaA + `", "after": "` + shaB + `", "created": true,
				"commits": [{"added": ["docs/a.md"]}]}`,
			want: Event{
				Kind: KindPush, Provider: ProviderGeneric, Ref: "refs/heads/feat", Branch: "feat", SHA: shaB, Before: zeroSHA,
				ChangedFiles: []string{"docs/a.md"}, ChangedFilesKnown: true,
			},
		},
		{
			name: "a later push's commits are not used: the source diffs it",
			body: `{"ref": "refs/heads/feat", "before": "` + shaA + `", "after": "` + shaB + `", "commits": [{"added": ["a"]}]}`,
			want: Event{Kind: KindPush, Provider: ProviderGeneric, Ref: "refs/heads/feat", Branch: "feat", SHA: shaB, Before: shaA},
		},
		{
			name: "changed_files wins over commits",
			body: `{"ref": "refs/heads/feat", "before": "` + zeroSHA + `", "after": "` + shaB + `",
				"changed_files": ["x"], "commits": [{"added": ["y"]}]}`,
			want: Event{
				Kind: KindPush, Provider: ProviderGeneric, Ref: "refs/heads/feat", Branch: "feat", SHA: shaB, Before: zeroSHA,
				ChangedFiles: []string{"x"}, ChangedFilesKnown: true,
			},
		},
		{
			name: "tag",
			body: `{"ref": "refs/tags/v2", "after": "` + shaC + `", "extra": {"ignored": true}}`,
			want: Event{Kind: KindTag, Provider: ProviderGeneric, Ref: "refs/tags/v2", Tag: "v2", SHA: shaC},
		},
		{
			name: "repository object with full_name",
			body: `{"ref": "refs/heads/main", "after": "` + shaC + `", "repository": {"full_name": "gitea/app", "id": 3}}`,
			want: Event{Kind: KindPush, Provider: ProviderGeneric, Repo: "gitea/app", Ref: "refs/heads/main", Branch: "main", SHA: shaC},
		},
		{
			name:        "deleted branch is ignored",
			body:        `{"ref": "refs/heads/old", "after": "` + zeroSHA + `"}`,
			wantIgnored: &IgnoredError{Kind: "generic", Reason: "branch deleted"},
		},
		{
			name:        "deleted tag is ignored",
			body:        `{"ref": "refs/tags/v1", "after": "` + zeroSHA + `"}`,
			wantIgnored: &IgnoredError{Kind: "generic", Reason: "tag deleted"},
		},
		{
			name:        "other ref is ignored",
			body:        `{"ref": "refs/merge-requests/1/head", "after": "abc"}`,
			wantIgnored: &IgnoredError{Kind: "generic", Reason: `ref "refs/merge-requests/1/head" is neither a branch nor a tag`},
		},
		{name: "missing ref", body: `{"after": "abc"}`, wantErr: `generic push payload: missing "ref"`},
		{name: "missing after", body: `{"ref": "refs/heads/main"}`, wantErr: `generic push payload: missing "after"`},
		{
			name:    "short ref",
			body:    `{"ref": "main", "after": "abc"}`,
			wantErr: `generic push payload: "ref" must be a full ref such as refs/heads/main, got "main"`,
		},
		{name: "not JSON", body: `ref=main`, wantErr: "generic push payload: decode body: ..."},
		{name: "changed_files not a list", body: `{"ref": "refs/heads/main", "after": "a", "changed_files": "a.go"}`, wantErr: "generic push payload: decode body: ..."},
		{
			name:    "repository a number",
			body:    `{"ref": "refs/heads/main", "after": "a", "repository": 7}`,
			wantErr: `generic push payload: "repository" must be a string or an object with "full_name": ...`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NormalizeGeneric([]byte(tt.body))
			switch {
			case tt.wantIgnored != nil:
				var ig *IgnoredError
				if !errors.As(err, &ig) {
					t.Fatalf("got error %v, want an *IgnoredError", err)
				}
				if diff := cmp.Diff(tt.wantIgnored, ig); diff != "" {
					t.Errorf("IgnoredError mismatch (-want +got):\n%s", diff)
				}
			case tt.wantErr != "":
				if err == nil {
					t.Fatalf("got event %+v, want error %q", got, tt.wantErr)
				}
				checkErrorText(t, err, tt.wantErr)
			default:
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Event mismatch (-want +got):\n%s", diff)
				}
				if err := got.Validate(); err != nil {
					t.Errorf("got invalid event: %v", err)
				}
			}
		})
	}
}
