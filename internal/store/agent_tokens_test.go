package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAgentTokens(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		expires := testNow.Add(30 * 24 * time.Hour)
		a, err := db.CreateAgentToken(ctx, AgentToken{Hash: "hash-a", Labels: []string{"linux", "gpu"}, ExpiresAt: &expires})
		if err != nil {
			t.Fatalf("create a: %v", err)
		}
		b, err := db.CreateAgentToken(ctx, AgentToken{Hash: "hash-b"})
		if err != nil {
			t.Fatalf("create b: %v", err)
		}
		if _, err := db.CreateAgentToken(ctx, AgentToken{Hash: "hash-a"}); !errors.Is(err, ErrConflict) {
			t.Errorf("create with a used hash: got %v, want ErrConflict", err)
		}

		got, err := db.AgentTokenByHash(ctx, "hash-a")
		if err != nil {
			t.Fatalf("look up: %v", err)
		}
		want := AgentToken{ID: a.ID, Hash: "hash-a", Labels: []string{"linux", "gpu"}, CreatedAt: a.CreatedAt, ExpiresAt: &expires}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("looked-up token (-want +got):\n%s", diff)
		}
		if _, err := db.AgentTokenByHash(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("look up an unknown hash: got %v, want ErrNotFound", err)
		}

		used := testNow.Add(time.Minute)
		if err := db.TouchAgentToken(ctx, b.ID, used); err != nil {
			t.Fatalf("touch: %v", err)
		}
		if err := db.TouchAgentToken(ctx, "missing", used); !errors.Is(err, ErrNotFound) {
			t.Errorf("touch a missing token: got %v, want ErrNotFound", err)
		}
		revoked := testNow.Add(time.Hour)
		tests := []struct {
			name    string
			id      string
			want    bool
			wantErr error
		}{
			{name: "revoke", id: a.ID, want: true},
			{name: "revoke again", id: a.ID, want: false},
			{name: "revoke a missing token", id: "missing", wantErr: ErrNotFound},
		}
		// Not parallel: "revoke again" follows "revoke".
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.RevokeAgentToken(ctx, tt.id, revoked)
				if got != tt.want || !errors.Is(err, tt.wantErr) {
					t.Errorf("revoke: got (%t, %v), want (%t, %v)", got, err, tt.want, tt.wantErr)
				}
			})
		}

		list, err := db.ListAgentTokens(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		wantList := []AgentToken{
			{ID: a.ID, Hash: "hash-a", Labels: []string{"linux", "gpu"}, CreatedAt: a.CreatedAt, ExpiresAt: &expires, RevokedAt: &revoked},
			{ID: b.ID, Hash: "hash-b", Labels: []string{}, CreatedAt: b.CreatedAt, LastUsedAt: &used},
		}
		if diff := cmp.Diff(wantList, list); diff != "" {
			t.Errorf("tokens (-want +got):\n%s", diff)
		}
	})
}
