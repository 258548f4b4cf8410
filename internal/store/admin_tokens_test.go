package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAdminTokens(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		expires := testNow.Add(24 * time.Hour)
		a, err := db.CreateAdminToken(ctx, AdminToken{Hash: "hash-a", Prefix: "kadm_aaaaaaa", Name: "alice", Role: "owner", CreatedBy: "bootstrap", ExpiresAt: &expires})
		if err != nil {
			t.Fatalf("create a: %v", err)
		}
		b, err := db.CreateAdminToken(ctx, AdminToken{Hash: "hash-b", Prefix: "kadm_bbbbbbb", Name: "bob", Role: "auditor", CreatedBy: a.ID})
		if err != nil {
			t.Fatalf("create b: %v", err)
		}
		if _, err := db.CreateAdminToken(ctx, AdminToken{Hash: "hash-a", Name: "x", Role: "admin"}); !errors.Is(err, ErrConflict) {
			t.Errorf("create with a used hash: got %v, want ErrConflict", err)
		}
		if _, err := db.CreateAdminToken(ctx, AdminToken{Hash: "hash-c", Name: "x", Role: "root"}); err == nil {
			t.Errorf("create with an unknown role: got no error, want the CHECK to refuse it")
		}
		got, err := db.AdminTokenByHash(ctx, "hash-b")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, got); diff != "" {
			t.Errorf("looked-up token (-want +got):\n%s", diff)
		}
		if _, err := db.AdminTokenByHash(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown hash: got %v, want ErrNotFound", err)
		}
		used := testNow.Add(time.Minute)
		if err := db.TouchAdminToken(ctx, b.ID, used); err != nil {
			t.Fatal(err)
		}
		if err := db.TouchAdminToken(ctx, "missing", used); !errors.Is(err, ErrNotFound) {
			t.Errorf("touch a missing token: got %v, want ErrNotFound", err)
		}
		revoked := testNow.Add(time.Hour)
		if ok, err := db.RevokeAdminToken(ctx, a.ID, revoked); !ok || err != nil {
			t.Errorf("revoke: got (%t, %v), want (true, nil)", ok, err)
		}
		if ok, err := db.RevokeAdminToken(ctx, a.ID, revoked); ok || err != nil {
			t.Errorf("revoke again: got (%t, %v), want (false, nil)", ok, err)
		}
		if _, err := db.RevokeAdminToken(ctx, "missing", revoked); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoke a missing token: got %v, want ErrNotFound", err)
		}
		list, err := db.ListAdminTokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		a.RevokedAt, b.LastUsedAt = &revoked, &used
		if diff := cmp.Diff([]AdminToken{a, b}, list); diff != "" {
			t.Errorf("tokens (-want +got):\n%s", diff)
		}
	})
}
