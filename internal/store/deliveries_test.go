package store

import (
	"errors"
	"fmt"
	"strings"
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
			{Source: "repo", DeliveryID: "d1", Kind: "push", Verdict: "accepted", RunIDs: []string{"r1", "r2"},
				ClientAddr: "192.0.2.7", UserAgent: "GitHub-Hookshot/abc", BodyBytes: 7012},
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

// TestWebhookEventIsBounded: whatever a sender puts in the headers and
// the path, a stored event's text fields stay within their bounds, as
// valid UTF-8 without control characters, on both engines.
func TestWebhookEventIsBounded(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		huge := strings.Repeat("x", 900<<10)
		got, err := db.RecordWebhookEvent(ctx, WebhookEvent{
			Source: huge, DeliveryID: huge, Kind: huge, Verdict: "rejected_signature", Detail: huge,
			ClientAddr: huge, UserAgent: "ua\x00\xff\x1b[2J" + huge, BodyBytes: -5,
			RunIDs: strings.Split(strings.Repeat("r,", 500), ","),
		})
		if err != nil {
			t.Fatalf("record: %v", err)
		}
		list, err := db.ListWebhookEvents(ctx, "", 10)
		if err != nil || len(list) != 1 {
			t.Fatalf("list: got %d events (%v), want 1", len(list), err)
		}
		if diff := cmp.Diff(got, list[0]); diff != "" {
			t.Errorf("returned event differs from the stored one (-returned +stored):\n%s", diff)
		}
		stored := list[0]
		for _, f := range []struct {
			name  string
			value string
			max   int
		}{
			{"source", stored.Source, maxEventSource},
			{"delivery id", stored.DeliveryID, maxEventDeliveryID},
			{"kind", stored.Kind, maxEventKind},
			{"detail", stored.Detail, maxEventDetail},
			{"client address", stored.ClientAddr, maxEventClientAddr},
			{"user agent", stored.UserAgent, maxEventUserAgent},
		} {
			if len(f.value) > f.max || !strings.HasSuffix(f.value, "…") {
				t.Errorf("%s: got %d bytes ending %q, want at most %d ending in …", f.name, len(f.value), f.value[max(0, len(f.value)-8):], f.max)
			}
		}
		if want := "ua\uFFFD\uFFFD\uFFFD[2Jx"; !strings.HasPrefix(stored.UserAgent, want) {
			t.Errorf("user agent: got %.12q…, want it to start %q", stored.UserAgent, want)
		}
		if stored.BodyBytes != 0 || len(stored.RunIDs) != maxEventRunIDs {
			t.Errorf("got body bytes %d and %d run ids, want 0 and %d", stored.BodyBytes, len(stored.RunIDs), maxEventRunIDs)
		}
	})
}

func TestBoundText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{name: "short", in: "push", max: 10, want: "push"},
		{name: "exactly the bound", in: "0123456789", max: 10, want: "0123456789"},
		{name: "one over", in: "0123456789a", max: 10, want: "0123456…"},
		{name: "cut at a character boundary", in: "ééééééé", max: 10, want: "ééé…"},
		{name: "control characters", in: "a\tb\x00c\x7f", max: 20, want: "a\uFFFDb\uFFFDc\uFFFD"},
		{name: "invalid utf-8", in: "a\xffb", max: 20, want: "a\uFFFDb"},
		{name: "replacement makes it too long", in: "\xff\xff\xff\xff", max: 10, want: "\uFFFD\uFFFD…"},
		{name: "empty", in: "", max: 10, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := BoundText(tt.in, tt.max)
			if got != tt.want {
				t.Errorf("BoundText(%q, %d): got %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if len(got) > tt.max {
				t.Errorf("BoundText(%q, %d): got %d bytes, want at most %d", tt.in, tt.max, len(got), tt.max)
			}
		})
	}
}

// TestWebhookEventBodies: only a processed or invalid_workflow event keeps
// its body, GetWebhookEvent reads it back, and the listing says which ones
// have one without reading it.
func TestWebhookEventBodies(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		body := []byte(`{"ref":"refs/heads/main","after":"abc"}` + "\x00\xff")
		want := map[string]bool{"processed": true, "invalid_workflow": true, "rejected_signature": false, "duplicate": false, "failed": false}
		ids := map[string]string{}
		for verdict := range want {
			ev, err := db.RecordWebhookEvent(ctx, WebhookEvent{Source: "repo", Verdict: verdict, Provider: "generic", Body: body})
			if err != nil {
				t.Fatalf("record %s: %v", verdict, err)
			}
			ids[verdict] = ev.ID
		}
		for verdict, keep := range want {
			got, err := db.GetWebhookEvent(ctx, "repo", ids[verdict])
			if err != nil {
				t.Fatalf("get %s: %v", verdict, err)
			}
			if keep && !cmp.Equal(got.Body, body) || !keep && got.Body != nil || got.HasBody != keep {
				t.Errorf("%s: got body %q (has %t), want kept=%t", verdict, got.Body, got.HasBody, keep)
			}
			if got.Provider != "generic" {
				t.Errorf("%s: got provider %q, want generic", verdict, got.Provider)
			}
		}
		list, err := db.ListWebhookEventsPage(ctx, "repo", nil, 10)
		if err != nil || len(list) != len(want) {
			t.Fatalf("list: got %d events (%v), want %d", len(list), err, len(want))
		}
		for _, ev := range list {
			if ev.Body != nil || ev.HasBody != want[ev.Verdict] {
				t.Errorf("listed %s: got body %q, has %t; want no body read, has %t", ev.Verdict, ev.Body, ev.HasBody, want[ev.Verdict])
			}
		}
		if _, err := db.GetWebhookEvent(ctx, "other", ids["processed"]); !errors.Is(err, ErrNotFound) {
			t.Errorf("get another source's event: got %v, want ErrNotFound", err)
		}
	})
}

// TestWebhookEventErrorLines: an event's error keeps its lines, each one
// cleaned, and a long one is cut at a line with an ellipsis line.
func TestWebhookEventErrorLines(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		short := "a.yml:1:2: bad\x1b[2J\nb.yml:3:4: worse"
		var long strings.Builder
		for i := range 1000 {
			fmt.Fprintf(&long, "c.yml:%d:1: problem number %d\n", i+1, i)
		}
		for _, tt := range []struct {
			name, in string
			check    func(string) bool
		}{
			{"lines kept, controls replaced", short, func(s string) bool { return s == "a.yml:1:2: bad\uFFFD[2J\nb.yml:3:4: worse" }},
			{"long cut at a line", long.String(), func(s string) bool {
				lines := strings.Split(s, "\n")
				return len(s) <= maxEventError && lines[len(lines)-1] == "…" && strings.HasPrefix(lines[len(lines)-2], "c.yml:") && len(lines) > 100
			}},
		} {
			ev, err := db.RecordWebhookEvent(ctx, WebhookEvent{Source: "repo", Verdict: "invalid_workflow", Error: tt.in})
			if err != nil {
				t.Fatalf("%s: record: %v", tt.name, err)
			}
			got, err := db.GetWebhookEvent(ctx, "repo", ev.ID)
			if err != nil {
				t.Fatalf("%s: get: %v", tt.name, err)
			}
			if !tt.check(got.Error) || got.Error != ev.Error {
				t.Errorf("%s: got error %q (returned %q)", tt.name, clipForTest(got.Error), clipForTest(ev.Error))
			}
		}
	})
}

// TestWebhookEventPages: pages after a cursor are the rest of the list,
// newest first, one source only.
func TestWebhookEventPages(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		var want []string
		for i := range 7 {
			ev, err := db.RecordWebhookEvent(ctx, WebhookEvent{Source: "repo", DeliveryID: fmt.Sprint(i), Verdict: "duplicate"})
			if err != nil {
				t.Fatal(err)
			}
			want = append([]string{ev.ID}, want...)
			if _, err := db.RecordWebhookEvent(ctx, WebhookEvent{Source: "other", Verdict: "duplicate"}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		var after *WebhookEventCursor
		for range 10 {
			page, err := db.ListWebhookEventsPage(ctx, "repo", after, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range page {
				got = append(got, ev.ID)
			}
			if len(page) < 3 {
				break
			}
			last := page[len(page)-1]
			after = &WebhookEventCursor{ReceivedAt: last.ReceivedAt, ID: last.ID}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pages of 3 (-want +got):\n%s", diff)
		}
	})
}

func clipForTest(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
