package caches_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/blobs"
	"github.com/kici-dev/kici/internal/caches"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/store/storetest"
	"github.com/kici-dev/kici/internal/trigger"
)

// TestScopesOf: each kind of event writes its own scope only, and reads
// its own, then its fallbacks; a pull request (from a fork too) never
// writes its base branch's scope.
func TestScopesOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   trigger.Event
		def  string
		want caches.Scopes
	}{
		{name: "push to a branch", ev: trigger.PushEvent("feature/x", ""),
			want: caches.Scopes{Write: "branch:feature/x", Read: []string{"branch:feature/x", "branch:main"}}},
		{name: "push to the default branch", ev: trigger.PushEvent("main", ""),
			want: caches.Scopes{Write: "branch:main", Read: []string{"branch:main"}}},
		{name: "configured default branch", ev: trigger.PushEvent("dev", ""), def: "trunk",
			want: caches.Scopes{Write: "branch:dev", Read: []string{"branch:dev", "branch:trunk"}}},
		{name: "tag", ev: trigger.TagEvent("v1.0", ""),
			want: caches.Scopes{Write: "tag:v1.0", Read: []string{"tag:v1.0", "branch:main"}}},
		{name: "pull request", ev: trigger.Event{Kind: trigger.KindPullRequest, Number: 7, BaseBranch: "release", Branch: "release", HeadBranch: "fix"},
			want: caches.Scopes{Write: "pull:7", Read: []string{"pull:7", "branch:release", "branch:main"}}},
		{name: "pull request from a fork", ev: trigger.Event{Kind: trigger.KindPullRequest, Number: 8, BaseBranch: "main", Branch: "main", HeadBranch: "main", Fork: true},
			want: caches.Scopes{Write: "pull:8", Read: []string{"pull:8", "branch:main"}}},
		{name: "manual run of a bare commit", ev: trigger.Event{Kind: trigger.KindManual},
			want: caches.Scopes{Write: "branch:main", Read: []string{"branch:main"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, caches.ScopesOf(tt.ev, tt.def)); diff != "" {
				t.Errorf("scopes (-want +got):\n%s", diff)
			}
		})
	}
}

// observer records what the service reports.
type observer struct {
	mu      sync.Mutex
	results []string
	bytes   int64
}

func (o *observer) CacheLookup(r string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results = append(o.results, r)
}

func (o *observer) CacheBytes(n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bytes = n
}

type fixture struct {
	svc   *caches.Service
	blobs *blobs.Dir
	obs   *observer
	now   time.Time
}

func newFixture(t *testing.T, db *store.DB, cfg caches.Config) *fixture {
	t.Helper()
	bs, err := blobs.NewDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{blobs: bs, obs: &observer{}, now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Now = func() time.Time { return f.now }
	cfg.Observer = f.obs
	f.svc, err = caches.New(slog.New(slog.NewTextHandler(t.Output(), nil)), db, bs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// save stores an entry of n bytes, a minute after the last.
func (f *fixture) save(t *testing.T, scope, key string, n int) store.CacheEntry {
	t.Helper()
	f.now = f.now.Add(time.Minute)
	body := bytes.Repeat([]byte(key[:1]), n)
	sum := sha256.Sum256(body)
	e, err := f.svc.Save(t.Context(), caches.Save{Source: "repo", Scope: scope, Key: key, Version: "v1", RunID: "r",
		SHA256: hex.EncodeToString(sum[:]), Size: int64(n)}, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("save %s %s: %v", scope, key, err)
	}
	return e
}

// TestLookupOrder: the exact key wins in the first scope that has it,
// then each restore key in order, as a prefix, scope first, then the
// fallbacks; the newest entry wins in a scope; another version never
// matches; the results are counted.
func TestLookupOrder(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, caches.Config{})
		ids := map[string]string{}
		for _, e := range []struct{ scope, key string }{
			{"branch:main", "go-linux-aaa"},
			{"branch:main", "go-linux-bbb"},
			{"branch:main", "npm-111"},
			{"pull:7", "go-linux-ccc"},
			{"pull:7", "npm-222"},
			{"branch:main", "npm-333"},
		} {
			ids[e.scope+" "+e.key] = f.save(t, e.scope, e.key, 10).ID
		}
		pr := []string{"pull:7", "branch:main"}
		tests := []struct {
			name      string
			read      []string
			key       string
			restore   []string
			version   string
			want      string // scope and key of the entry; "" for a miss
			wantExact bool
		}{
			{name: "exact in the fallback scope", read: pr, key: "go-linux-aaa", want: "branch:main go-linux-aaa", wantExact: true},
			{name: "exact in the own scope", read: pr, key: "go-linux-ccc", want: "pull:7 go-linux-ccc", wantExact: true},
			{name: "exact key not readable", read: []string{"branch:main"}, key: "go-linux-ccc", restore: []string{"nothing-"}},
			{name: "restore key: own scope before the fallback, though older", read: pr, key: "npm-999", restore: []string{"npm-"}, want: "pull:7 npm-222"},
			{name: "restore key: the newest in the scope", read: []string{"branch:main"}, key: "go-linux-zzz", restore: []string{"go-"}, want: "branch:main go-linux-bbb"},
			{name: "restore keys in order", read: pr, key: "x", restore: []string{"none-", "go-linux-", "npm-"}, want: "pull:7 go-linux-ccc"},
			{name: "another version", read: pr, key: "go-linux-aaa", restore: []string{"go-"}, version: "v2"},
			{name: "miss", read: pr, key: "rust-1", restore: []string{"rust-"}},
		}
		var wantResults []string
		for _, tt := range tests {
			version := tt.version
			if version == "" {
				version = "v1"
			}
			e, exact, err := f.svc.Lookup(t.Context(), caches.Query{Source: "repo", Read: tt.read, Key: tt.key, Version: version, RestoreKeys: tt.restore})
			switch {
			case tt.want == "":
				if !errors.Is(err, caches.ErrMiss) {
					t.Errorf("%s: got %s %s, %v, want a miss", tt.name, e.Scope, e.Key, err)
				}
				wantResults = append(wantResults, caches.ResultMiss)
			case err != nil || e.ID != ids[tt.want] || exact != tt.wantExact:
				t.Errorf("%s: got %s %s (exact %t), %v, want %s (exact %t)", tt.name, e.Scope, e.Key, exact, err, tt.want, tt.wantExact)
			case exact:
				wantResults = append(wantResults, caches.ResultHit)
			default:
				wantResults = append(wantResults, caches.ResultPartial)
			}
		}
		if diff := cmp.Diff(wantResults, f.obs.results); diff != "" {
			t.Errorf("counted results (-want +got):\n%s", diff)
		}
	})
}

// TestEviction: past the total size the least recently used entries go,
// a restored entry counting as used; an entry over the per-entry limit is
// refused naming the limit; the total is reported.
func TestEviction(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, caches.Config{MaxBytes: 300, MaxEntryBytes: 150})
		a := f.save(t, "branch:main", "a", 100)
		b := f.save(t, "branch:main", "b", 100)
		c := f.save(t, "branch:main", "c", 100)
		f.now = f.now.Add(time.Minute)
		if _, _, err := f.svc.Lookup(t.Context(), caches.Query{Source: "repo", Read: []string{"branch:main"}, Key: "a", Version: "v1"}); err != nil {
			t.Fatal(err)
		}
		d := f.save(t, "branch:main", "d", 100) // 400 > 300: b, now the least recently used, goes
		for _, tt := range []struct {
			e    store.CacheEntry
			kept bool
		}{{a, true}, {b, false}, {c, true}, {d, true}} {
			_, err := db.GetCacheEntry(t.Context(), tt.e.ID)
			if kept := err == nil; kept != tt.kept {
				t.Errorf("entry %s: got kept %t (%v), want %t", tt.e.Key, kept, err, tt.kept)
			}
			if _, err := f.blobs.Stat(t.Context(), tt.e.BlobKey); (err == nil) != tt.kept {
				t.Errorf("blob of %s: got %v, want kept %t", tt.e.Key, err, tt.kept)
			}
		}
		if f.obs.bytes != 300 {
			t.Errorf("reported bytes: got %d, want 300", f.obs.bytes)
		}
		body := bytes.Repeat([]byte("x"), 151)
		sum := sha256.Sum256(body)
		_, err := f.svc.Save(t.Context(), caches.Save{Source: "repo", Scope: "branch:main", Key: "big", Version: "v1",
			SHA256: hex.EncodeToString(sum[:]), Size: -1}, bytes.NewReader(body))
		var le *caches.LimitError
		if !errors.As(err, &le) || le.Name != "KICI_CACHE_MAX_ENTRY_BYTES" {
			t.Errorf("oversized entry: got %v, want a LimitError naming KICI_CACHE_MAX_ENTRY_BYTES", err)
		}
	})
}

// TestSweepDeletesUnused: the sweep deletes entries not restored for the
// configured time, keeps the others, and collects orphan blobs.
func TestSweepDeletesUnused(t *testing.T) {
	t.Parallel()
	storetest.ForEachEngine(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, caches.Config{MaxUnused: 24 * time.Hour})
		old := f.save(t, "branch:main", "old", 10)
		f.now = f.now.Add(23 * time.Hour)
		fresh := f.save(t, "branch:main", "fresh", 10)
		if _, err := f.blobs.Put(t.Context(), "caches/orphan.tgz", bytes.NewReader([]byte("x")), 10, ""); err != nil {
			t.Fatal(err)
		}
		st, err := f.svc.Sweep(t.Context(), f.now.Add(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(caches.SweepStats{Unused: 1, Orphans: 1}, st); diff != "" {
			t.Errorf("sweep (-want +got):\n%s", diff)
		}
		if _, err := db.GetCacheEntry(t.Context(), old.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unused entry: got %v, want it deleted", err)
		}
		if _, err := db.GetCacheEntry(t.Context(), fresh.ID); err != nil {
			t.Errorf("fresh entry: got %v, want it kept", err)
		}
	})
}
