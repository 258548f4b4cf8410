package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestClusterCA: there is no CA at first; the first insert wins and every
// later one gets the first back.
func TestClusterCA(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		if _, err := db.GetClusterCA(ctx); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get before any CA: got %v, want ErrNotFound", err)
		}
		first, err := db.InsertClusterCA(ctx, ClusterCA{CertPEM: "cert-1", KeySealed: "sealed-1"})
		if err != nil {
			t.Fatal(err)
		}
		if first.CertPEM != "cert-1" || first.KeySealed != "sealed-1" || first.CreatedAt.IsZero() {
			t.Fatalf("first insert: got %+v, want cert-1, sealed-1 and a creation time", first)
		}
		second, err := db.InsertClusterCA(ctx, ClusterCA{CertPEM: "cert-2", KeySealed: "sealed-2"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, second); diff != "" {
			t.Errorf("second insert: got another CA than the first (-first +second):\n%s", diff)
		}
		got, err := db.GetClusterCA(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("get (-want +got):\n%s", diff)
		}
		if _, err := db.InsertClusterCA(ctx, ClusterCA{CertPEM: "cert-3"}); err == nil {
			t.Error("insert without a key: got nil, want an error")
		}
	})
}

// Coordinators creating the CA at the same moment, each through its own
// handle on one database, all end up with the same CA.
func TestClusterCARace(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			dbA, dbB := twoHandles(t, e, newTestClock())
			const n = 6
			got := make([]ClusterCA, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				db := dbA
				if i%2 == 1 {
					db = dbB
				}
				wg.Go(func() {
					got[i], errs[i] = db.InsertClusterCA(t.Context(), ClusterCA{CertPEM: fmt.Sprintf("cert-%d", i), KeySealed: fmt.Sprintf("sealed-%d", i)})
				})
			}
			wg.Wait()
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("insert %d: %v", i, errs[i])
				}
				if diff := cmp.Diff(got[0], got[i]); diff != "" {
					t.Errorf("insert %d got another CA than insert 0 (-0 +%d):\n%s", i, i, diff)
				}
			}
			stored, err := dbB.GetClusterCA(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got[0], stored); diff != "" {
				t.Errorf("stored CA (-returned +stored):\n%s", diff)
			}
		})
	}
}

// TestJoinTokens: create, list, read, spend and revoke, on the store's
// clock.
func TestJoinTokens(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			clock := newTestClock()
			db, _ := twoHandles(t, e, clock)
			ctx := t.Context()
			expires := testNow.Add(time.Hour)
			a, err := db.CreateJoinToken(ctx, JoinToken{ID: "aaaaaaaaaaaa", SecretHash: "hash-a", CreatedBy: "bootstrap", ExpiresAt: &expires})
			if err != nil {
				t.Fatal(err)
			}
			want := JoinToken{ID: "aaaaaaaaaaaa", SecretHash: "hash-a", CreatedBy: "bootstrap", CreatedAt: testNow, ExpiresAt: &expires}
			if diff := cmp.Diff(want, a); diff != "" {
				t.Errorf("create (-want +got):\n%s", diff)
			}
			b, err := db.CreateJoinToken(ctx, JoinToken{ID: "bbbbbbbbbbbb", SecretHash: "hash-b", CreatedBy: "tok-1"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.CreateJoinToken(ctx, JoinToken{ID: "aaaaaaaaaaaa", SecretHash: "hash-x"}); !errors.Is(err, ErrConflict) {
				t.Errorf("create with a taken id: got %v, want ErrConflict", err)
			}
			list, err := db.ListJoinTokens(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]JoinToken{a, b}, list); diff != "" {
				t.Errorf("list (-want +got):\n%s", diff)
			}
			got, err := db.GetJoinToken(ctx, "bbbbbbbbbbbb")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(b, got); diff != "" {
				t.Errorf("get (-want +got):\n%s", diff)
			}
			if _, err := db.GetJoinToken(ctx, "nnnnnnnnnnnn"); !errors.Is(err, ErrNotFound) {
				t.Errorf("get unknown: got %v, want ErrNotFound", err)
			}

			// Spend a: it records the node, and a second use is refused.
			clock.advance(time.Minute)
			used, err := db.UseJoinToken(ctx, "aaaaaaaaaaaa", "node-1")
			if err != nil {
				t.Fatalf("use a: %v", err)
			}
			if used.UsedBy != "node-1" || used.UsedAt == nil || !used.UsedAt.After(testNow) {
				t.Errorf("use a: got used by %q at %v, want node-1 after %v", used.UsedBy, used.UsedAt, testNow)
			}
			if _, err := db.UseJoinToken(ctx, "aaaaaaaaaaaa", "node-2"); !errors.Is(err, ErrJoinTokenUsed) {
				t.Errorf("use a again: got %v, want ErrJoinTokenUsed", err)
			}
			if got, _ := db.GetJoinToken(ctx, "aaaaaaaaaaaa"); got.UsedBy != "node-1" {
				t.Errorf("after the refused second use: used by %q, want node-1 still", got.UsedBy)
			}

			// Revoke b: twice is false the second time; it can't be used.
			if changed, err := db.RevokeJoinToken(ctx, "bbbbbbbbbbbb"); err != nil || !changed {
				t.Fatalf("revoke b: got (%v, %v), want (true, nil)", changed, err)
			}
			if changed, err := db.RevokeJoinToken(ctx, "bbbbbbbbbbbb"); err != nil || changed {
				t.Errorf("revoke b again: got (%v, %v), want (false, nil)", changed, err)
			}
			if _, err := db.RevokeJoinToken(ctx, "nnnnnnnnnnnn"); !errors.Is(err, ErrNotFound) {
				t.Errorf("revoke unknown: got %v, want ErrNotFound", err)
			}
			if _, err := db.UseJoinToken(ctx, "bbbbbbbbbbbb", "node-3"); !errors.Is(err, ErrJoinTokenRevoked) {
				t.Errorf("use revoked b: got %v, want ErrJoinTokenRevoked", err)
			}
			if _, err := db.UseJoinToken(ctx, "nnnnnnnnnnnn", "node-3"); !errors.Is(err, ErrNotFound) {
				t.Errorf("use unknown: got %v, want ErrNotFound", err)
			}
			if _, err := db.UseJoinToken(ctx, "aaaaaaaaaaaa", ""); err == nil {
				t.Error("use without a node id: got nil, want an error")
			}
		})
	}
}

// TestUseJoinTokenExpiry: a token may be spent up to, not at, its expiry
// by the store's clock; a token without an expiry never expires.
func TestUseJoinTokenExpiry(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			clock := newTestClock()
			db, _ := twoHandles(t, e, clock)
			ctx := t.Context()
			expires := testNow.Add(time.Hour)
			for _, id := range []string{"early2222222", "late22222222"} {
				if _, err := db.CreateJoinToken(ctx, JoinToken{ID: id, SecretHash: "h", CreatedBy: "bootstrap", ExpiresAt: &expires}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.CreateJoinToken(ctx, JoinToken{ID: "forever22222", SecretHash: "h", CreatedBy: "bootstrap"}); err != nil {
				t.Fatal(err)
			}
			clock.advance(time.Hour - time.Second)
			if _, err := db.UseJoinToken(ctx, "early2222222", "node-1"); err != nil {
				t.Errorf("use a second before expiry: %v", err)
			}
			clock.advance(time.Second)
			if _, err := db.UseJoinToken(ctx, "late22222222", "node-2"); !errors.Is(err, ErrJoinTokenExpired) {
				t.Errorf("use at expiry: got %v, want ErrJoinTokenExpired", err)
			}
			clock.advance(365 * 24 * time.Hour)
			if _, err := db.UseJoinToken(ctx, "forever22222", "node-3"); err != nil {
				t.Errorf("use a token without expiry a year on: %v", err)
			}
		})
	}
}

// Joins racing with one token: exactly one spends it, the others are
// told it is used.
func TestUseJoinTokenRace(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			dbA, dbB := twoHandles(t, e, newTestClock())
			if _, err := dbA.CreateJoinToken(t.Context(), JoinToken{ID: "race22222222", SecretHash: "h", CreatedBy: "bootstrap"}); err != nil {
				t.Fatal(err)
			}
			const n = 6
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				db := dbA
				if i%2 == 1 {
					db = dbB
				}
				wg.Go(func() { _, errs[i] = db.UseJoinToken(t.Context(), "race22222222", fmt.Sprintf("node-%d", i)) })
			}
			wg.Wait()
			won := 0
			for i, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, ErrJoinTokenUsed):
					t.Errorf("use %d: got %v, want nil or ErrJoinTokenUsed", i, err)
				}
			}
			if won != 1 {
				t.Errorf("got %d joins spending one token, want 1 (errors %v)", won, errs)
			}
		})
	}
}
