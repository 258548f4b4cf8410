package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMarkDeliveryIsInsertOrIgnore(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		expires := testNow.Add(24 * time.Hour)
		tests := []struct {
			name       string
			source, id string
			expiresAt  time.Time
			want       bool
		}{
			{name: "first delivery", source: "repo", id: "d1", expiresAt: expires, want: true},
			{name: "same delivery again", source: "repo", id: "d1", expiresAt: expires, want: false},
			{name: "same id, other source", source: "other", id: "d1", expiresAt: expires, want: true},
			{name: "other delivery", source: "repo", id: "d2", expiresAt: testNow.Add(-time.Second), want: true},
			{name: "expired record counts as new", source: "repo", id: "d2", expiresAt: expires, want: true},
			{name: "renewed record is remembered", source: "repo", id: "d2", expiresAt: expires, want: false},
		}
		// Not parallel: each case depends on the ones before.
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := db.MarkDelivery(ctx, tt.source, tt.id, tt.expiresAt)
				if err != nil {
					t.Fatalf("mark: %v", err)
				}
				if got != tt.want {
					t.Errorf("mark %s/%s: got new=%t, want %t", tt.source, tt.id, got, tt.want)
				}
				seen, err := db.DeliverySeen(ctx, tt.source, tt.id)
				if err != nil {
					t.Fatalf("seen: %v", err)
				}
				if wantSeen := tt.expiresAt.After(testNow); seen != wantSeen {
					t.Errorf("seen %s/%s: got %t, want %t", tt.source, tt.id, seen, wantSeen)
				}
			})
		}
		if seen, err := db.DeliverySeen(ctx, "repo", "never"); err != nil || seen {
			t.Errorf("seen for an unknown delivery: got (%t, %v), want (false, nil)", seen, err)
		}
	})
}

func TestMarkDeliveryConcurrently(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		var news atomic.Int32
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				isNew, err := db.MarkDelivery(ctx, "repo", "same", testNow.Add(time.Hour))
				if err != nil {
					t.Errorf("mark: %v", err)
				}
				if isNew {
					news.Add(1)
				}
			})
		}
		wg.Wait()
		if got := news.Load(); got != 1 {
			t.Errorf("got %d callers told the delivery is new, want 1", got)
		}
	})
}

func TestPurgeExpiredDeliveries(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		for id, expires := range map[string]time.Time{
			"old":    testNow.Add(-time.Hour),
			"now":    testNow,
			"future": testNow.Add(time.Hour),
		} {
			if _, err := db.MarkDelivery(ctx, "repo", id, expires); err != nil {
				t.Fatalf("mark %s: %v", id, err)
			}
		}
		n, err := db.PurgeExpiredDeliveries(ctx, testNow)
		if err != nil {
			t.Fatalf("purge: %v", err)
		}
		if n != 2 {
			t.Errorf("purged %d records, want 2", n)
		}
		if got := countRows(t, db, "delivery_dedup"); got != 1 {
			t.Errorf("got %d records left, want 1", got)
		}
	})
}

func TestWebhookEvents(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		var recorded []WebhookEvent
		for i, ev := range []WebhookEvent{
			{Source: "repo", DeliveryID: "d1", Kind: "push", Verdict: "accepted", RunIDs: []string{"r1", "r2"}},
			{Source: "other", DeliveryID: "d2", Kind: "ping", Verdict: "ignored", Detail: "ping"},
			{Source: "repo", DeliveryID: "d3", Kind: "push", Verdict: "rejected_signature", ReceivedAt: testNow.Add(time.Hour)},
		} {
			got, err := db.RecordWebhookEvent(ctx, ev)
			if err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			if got.ID == "" || got.ReceivedAt.IsZero() || got.RunIDs == nil {
				t.Errorf("record %d: got %+v, want an ID, a time and a run list", i, got)
			}
			recorded = append(recorded, got)
		}
		if _, err := db.RecordWebhookEvent(ctx, WebhookEvent{Source: "repo"}); err == nil {
			t.Errorf("record without a verdict: got no error, want one")
		}

		tests := []struct {
			name   string
			source string
			limit  int
			want   []WebhookEvent
		}{
			{name: "all, newest first", want: []WebhookEvent{recorded[2], recorded[1], recorded[0]}},
			{name: "one source", source: "repo", want: []WebhookEvent{recorded[2], recorded[0]}},
			{name: "limit", limit: 1, want: []WebhookEvent{recorded[2]}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				got, err := db.ListWebhookEvents(t.Context(), tt.source, tt.limit)
				if err != nil {
					t.Fatalf("list: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			})
		}
	})
}
