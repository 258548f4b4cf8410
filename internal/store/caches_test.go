package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
)

// TestCacheEntries: exact and prefix lookups stay within their source,
// scope and version and take the newest; a save under the same identity
// replaces the entry and names the replaced blob; entries come out least
// recently used first, and a touch moves one to the back.
func TestCacheEntries(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		put := func(id, source, scope, key, version string, at time.Time) {
			t.Helper()
			if _, err := db.PutCacheEntry(ctx, store.CacheEntry{ID: id, Source: source, Scope: scope, Key: key, Version: version,
				BlobKey: "caches/" + id, Size: 10, SHA256: "x", RunID: "r", CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		put("old", "repo", "branch:main", "go-aaa", "v1", t0)
		put("new", "repo", "branch:main", "go-bbb", "v1", t0.Add(time.Minute))
		put("other-version", "repo", "branch:main", "go-ccc", "v2", t0.Add(2*time.Minute))
		put("other-scope", "repo", "branch:dev", "go-ddd", "v1", t0.Add(3*time.Minute))
		put("other-source", "app", "branch:main", "go-eee", "v1", t0.Add(4*time.Minute))
		put("percent", "repo", "branch:main", "%x_y", "v1", t0)

		tests := []struct {
			name string
			find func() (store.CacheEntry, error)
			want string // entry id; "" for ErrNotFound
		}{
			{name: "exact", find: func() (store.CacheEntry, error) { return db.FindCacheEntry(ctx, "repo", "branch:main", "go-aaa", "v1") }, want: "old"},
			{name: "exact, other version", find: func() (store.CacheEntry, error) { return db.FindCacheEntry(ctx, "repo", "branch:main", "go-ccc", "v1") }},
			{name: "prefix takes the newest", find: func() (store.CacheEntry, error) {
				return db.FindCacheEntryByPrefix(ctx, "repo", "branch:main", "go-", "v1")
			}, want: "new"},
			{name: "prefix in another scope", find: func() (store.CacheEntry, error) {
				return db.FindCacheEntryByPrefix(ctx, "repo", "branch:dev", "go-", "v1")
			}, want: "other-scope"},
			{name: "prefix of another source", find: func() (store.CacheEntry, error) {
				return db.FindCacheEntryByPrefix(ctx, "app", "branch:main", "go-", "v1")
			}, want: "other-source"},
			{name: "prefix is not a pattern", find: func() (store.CacheEntry, error) {
				return db.FindCacheEntryByPrefix(ctx, "repo", "branch:main", "%", "v1")
			}, want: "percent"},
			{name: "prefix wildcards match nothing", find: func() (store.CacheEntry, error) {
				return db.FindCacheEntryByPrefix(ctx, "repo", "branch:main", "g_-", "v1")
			}},
			{name: "prefix is case-sensitive", find: func() (store.CacheEntry, error) {
				return db.FindCacheEntryByPrefix(ctx, "repo", "branch:main", "GO-", "v1")
			}},
		}
		for _, tt := range tests {
			got, err := tt.find()
			switch {
			case tt.want == "" && !errors.Is(err, store.ErrNotFound):
				t.Errorf("%s: got %q, %v, want ErrNotFound", tt.name, got.ID, err)
			case tt.want != "" && (err != nil || got.ID != tt.want):
				t.Errorf("%s: got %q, %v, want %q", tt.name, got.ID, err, tt.want)
			}
		}

		replaced, err := db.PutCacheEntry(ctx, store.CacheEntry{ID: "again", Source: "repo", Scope: "branch:main", Key: "go-aaa", Version: "v1",
			BlobKey: "caches/again", Size: 30, CreatedAt: t0.Add(10 * time.Minute)})
		if err != nil || replaced != "caches/old" {
			t.Fatalf("save again: got %q, %v, want caches/old replaced", replaced, err)
		}
		if n, err := db.CacheBytes(ctx); err != nil || n != 5*10+30 {
			t.Errorf("cache bytes: got %d, %v, want 80", n, err)
		}
		if err := db.TouchCacheEntry(ctx, "percent", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		lru, err := db.LeastRecentlyUsedCacheEntries(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, e := range lru {
			order = append(order, e.ID)
		}
		if diff := cmp.Diff([]string{"new", "other-version", "other-scope", "other-source", "again", "percent"}, order); diff != "" {
			t.Errorf("least recently used first (-want +got):\n%s", diff)
		}
		unused, err := db.CacheEntriesUnusedSince(ctx, t0.Add(3*time.Minute), 10)
		if err != nil || len(unused) != 2 {
			t.Errorf("unused since t0+3m: got %d, %v, want 2 (new, other-version)", len(unused), err)
		}
	})
}
