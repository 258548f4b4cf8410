package store

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSources(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		created, err := db.CreateSource(ctx, Source{
			Name: "hello", Kind: SourceLocal, Location: "/src/hello", WebhookSecrets: []string{"new", "old"},
		})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		want := Source{Name: "hello", Kind: SourceLocal, Location: "/src/hello", WebhookSecrets: []string{"new", "old"},
			ForkPullRequests: ForkApprove, CreatedAt: created.CreatedAt}
		if created.CreatedAt.IsZero() {
			t.Errorf("got zero CreatedAt, want a stamp")
		}
		got, err := db.GetSource(ctx, "hello")
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("get (-want +got):\n%s", diff)
		}

		if _, err := db.CreateSource(ctx, Source{Name: "hello", Kind: SourceGit, Location: "x"}); !errors.Is(err, ErrConflict) {
			t.Errorf("create duplicate: got %v, want ErrConflict", err)
		}
		if _, err := db.CreateSource(ctx, Source{Name: "bad", Kind: "svn", Location: "x"}); err == nil {
			t.Errorf("create with kind svn: got no error, want one")
		}
		if _, err := db.CreateSource(ctx, Source{Name: "gh", Kind: SourceGitHub, Location: "o/r"}); err != nil {
			t.Fatalf("create gh: %v", err)
		}

		want.Kind, want.Location, want.WebhookSecrets = SourceGit, "https://example.com/hello.git", []string{"newer"}
		want.ForkPullRequests = ForkRun
		want.GitHubRepo = "kici-dev/hello"
		if err := db.UpdateSource(ctx, want); err != nil {
			t.Fatalf("update: %v", err)
		}
		list, err := db.ListSources(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if diff := cmp.Diff([]string{"gh", "hello"}, sourceNames(list)); diff != "" {
			t.Errorf("list names (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, list[1]); diff != "" {
			t.Errorf("updated source (-want +got):\n%s", diff)
		}
		if list[0].WebhookSecrets == nil || len(list[0].WebhookSecrets) != 0 {
			t.Errorf("got webhook secrets %#v for a source created without, want an empty list", list[0].WebhookSecrets)
		}

		if err := db.DeleteSource(ctx, "hello"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		for name, err := range map[string]error{
			"get deleted":    func() error { _, err := db.GetSource(ctx, "hello"); return err }(),
			"delete deleted": db.DeleteSource(ctx, "hello"),
			"update missing": db.UpdateSource(ctx, Source{Name: "nope", Kind: SourceLocal}),
		} {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: got %v, want ErrNotFound", name, err)
			}
		}
	})
}

// TestSourceForkPolicy checks that each fork policy is stored as given,
// that none given reads as approve, and that the database refuses any
// other value.
func TestSourceForkPolicy(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		tests := []struct {
			name   string
			policy ForkPolicy
			want   ForkPolicy
		}{
			{name: "default", policy: "", want: ForkApprove},
			{name: "approve", policy: ForkApprove, want: ForkApprove},
			{name: "run", policy: ForkRun, want: ForkRun},
			{name: "ignore", policy: ForkIgnore, want: ForkIgnore},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := db.CreateSource(ctx, Source{Name: "fork-" + tt.name, Kind: SourceLocal, Location: "/x", ForkPullRequests: tt.policy}); err != nil {
					t.Fatalf("create: %v", err)
				}
				got, err := db.GetSource(ctx, "fork-"+tt.name)
				if err != nil {
					t.Fatalf("get: %v", err)
				}
				if got.ForkPullRequests != tt.want {
					t.Errorf("got fork policy %q, want %q", got.ForkPullRequests, tt.want)
				}
			})
		}
		if _, err := db.CreateSource(ctx, Source{Name: "fork-bad", Kind: SourceLocal, Location: "/x", ForkPullRequests: "always"}); err == nil {
			t.Errorf("create with fork policy \"always\": got no error, want the CHECK constraint's")
		}
	})
}

func sourceNames(list []Source) []string {
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	return names
}
