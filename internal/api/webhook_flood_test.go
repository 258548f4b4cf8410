package api_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to measure PostgreSQL tables

	"github.com/kici-dev/kici/internal/api"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/trigger"
)

// dbBytes is how much disk the orchestrator's database takes: the SQLite
// files of the data dir, or the PostgreSQL tables a delivery can write
// to (with their indexes and TOAST).
func (h *harness) dbBytes(t *testing.T) int64 {
	t.Helper()
	if h.dbURL == "" {
		var n int64
		files, err := filepath.Glob(filepath.Join(h.dataDir, store.SQLiteFile+"*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			n += st.Size()
		}
		return n
	}
	db, err := sql.Open("pgx", h.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	err = db.QueryRowContext(t.Context(), `SELECT pg_total_relation_size('webhook_events') +
		pg_total_relation_size('delivery_dedup') + pg_total_relation_size('audit_log')`).Scan(&n)
	if err != nil {
		t.Fatalf("measure tables: %v", err)
	}
	return n
}

// metricValue reads one sample of /metrics, 0 when it is absent.
func (h *harness) metricValue(t *testing.T, sample string) float64 {
	t.Helper()
	resp := h.do(t, http.MethodGet, "/metrics", nil, nil)
	sc := bufio.NewScanner(bytes.NewReader(resp.body))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return v
		}
	}
	return 0
}

// storedBytes sums the text stored for the events of the delivery log.
func storedBytes(events []store.WebhookEvent) int {
	n := 0
	for _, ev := range events {
		n += len(ev.ID) + len(ev.Source) + len(ev.DeliveryID) + len(ev.Kind) + len(ev.Verdict) + len(ev.Detail) +
			len(ev.ClientAddr) + len(ev.UserAgent) + len(strings.Join(ev.RunIDs, ","))
	}
	return n
}

// TestWebhookFloodIsBounded replays the reported abuse: 50 unauthenticated
// deliveries with a 900 KB delivery id, and 50 with a 900 KB body. The
// long ids get 400 and store nothing; the rejected bodies leave only
// sampled metadata rows (at most api.RejectedPerKey a minute for one
// source and address, the rest counted in a metric); made-up source names
// share one sample; a body over the limit is recorded as a 413. The
// database grows by kilobytes, not by the 90 MB seen before.
func TestWebhookFloodIsBounded(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "flood", dir, webhookSecret)
		h.addSource(t, "flood-big", dir, webhookSecret)
		db := h.openStore(t)
		events := func(source string) []store.WebhookEvent {
			t.Helper()
			list, err := db.ListWebhookEvents(t.Context(), source, 1000)
			if err != nil {
				t.Fatal(err)
			}
			return list
		}
		const n = 50
		big := bytes.Repeat([]byte("x"), 900<<10)
		before := h.dbBytes(t)
		start := time.Now()

		// A delivery id past 200 characters: 400, nothing stored.
		for i := range n {
			route := []string{"generic", "github"}[i%2]
			resp := h.deliver(t, delivery{route: route, source: "flood", event: "push", id: string(big), body: genericPush(strings.Repeat("a", 40))})
			if resp.status != http.StatusBadRequest {
				t.Fatalf("long id %d: got status %d (%.200s), want 400", i, resp.status, resp.body)
			}
			header := map[string]string{"generic": "X-Kici-Delivery", "github": "X-GitHub-Delivery"}[route]
			if got, want := resp.apiError(t).Error, fmt.Sprintf("%s header: %d characters, want at most 200", header, len(big)); got != want {
				t.Fatalf("long id %d: got error %q, want %q", i, got, want)
			}
		}
		if got := events(""); len(got) != 0 {
			t.Fatalf("after the long ids: got %d stored events, want none", len(got))
		}

		// A 900 KB unsigned body: 401, metadata of a sample stored.
		for i := range n {
			resp := h.deliver(t, delivery{route: "generic", source: "flood", id: fmt.Sprintf("flood-%d", i), body: big})
			if resp.status != http.StatusUnauthorized {
				t.Fatalf("unsigned body %d: got status %d (%s), want 401", i, resp.status, resp.body)
			}
		}
		// Made-up source names share one sample per address.
		for i := range n {
			resp := h.deliver(t, delivery{route: "github", source: fmt.Sprintf("made-up-%d", i), event: "push", id: fmt.Sprintf("nope-%d", i), body: big})
			if resp.status != http.StatusNotFound {
				t.Fatalf("unknown source %d: got status %d (%s), want 404", i, resp.status, resp.body)
			}
		}
		// A body over the limit is refused, and recorded.
		huge := bytes.Repeat([]byte(" "), trigger.MaxBodySize+1)
		if resp := h.deliver(t, delivery{route: "generic", source: "flood-big", id: "too-big", body: huge}); resp.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("body over the limit: got status %d (%s), want 413", resp.status, resp.body)
		}
		// Sampling windows are a minute long; a loaded machine may have
		// crossed into another one (or two) while sending.
		windows := 2 + int(time.Since(start)/time.Minute)

		rejected := events("flood")
		if len(rejected) == 0 || len(rejected) > api.RejectedPerKey*windows {
			t.Errorf("source flood: got %d stored events, want 1 to %d", len(rejected), api.RejectedPerKey*windows)
		}
		for _, ev := range rejected {
			if ev.Verdict != "rejected_signature" || ev.BodyBytes != int64(len(big)) || ev.ClientAddr != "127.0.0.1" || !strings.HasPrefix(ev.DeliveryID, "flood-") {
				t.Errorf("stored event %+v: want verdict rejected_signature, body_bytes %d, client 127.0.0.1 and its delivery id", ev, len(big))
			}
		}
		unrecorded := h.metricValue(t, "kici_orch_webhook_deliveries_unrecorded_total")
		var unknown []store.WebhookEvent
		for _, ev := range events("") {
			if strings.HasPrefix(ev.Source, "made-up-") {
				unknown = append(unknown, ev)
				if ev.Verdict != "rejected_unknown_source" {
					t.Errorf("stored event %+v: want verdict rejected_unknown_source", ev)
				}
			}
		}
		if len(unknown) == 0 || len(unknown) > api.RejectedPerKey*windows {
			t.Errorf("made-up sources: got %d stored events, want 1 to %d", len(unknown), api.RejectedPerKey*windows)
		}
		if got, want := int(unrecorded)+len(rejected)+len(unknown), 2*n; got != want {
			t.Errorf("got %d recorded + %d unrecorded deliveries, want %d in all", len(rejected)+len(unknown), int(unrecorded), want)
		}
		if got := h.metricValue(t, `kici_orch_webhook_deliveries_total{verdict="rejected_delivery_id"}`); got != n {
			t.Errorf("got %v deliveries counted with verdict rejected_delivery_id, want %d", got, n)
		}
		tooBig := events("flood-big")
		if len(tooBig) != 1 || tooBig[0].Verdict != "rejected_too_large" || tooBig[0].BodyBytes <= trigger.MaxBodySize ||
			tooBig[0].Detail != fmt.Sprintf("webhook body over %d bytes", trigger.MaxBodySize) {
			t.Errorf("source flood-big: got events %+v, want one rejected_too_large with its size", tooBig)
		}

		// The audit log has the 401s that were recorded, not the others.
		var audit apiv1.AuditList
		h.mustAdmin(t, http.MethodGet, "/api/v1/audit?action=webhook.generic&limit=1000", nil, http.StatusOK, &audit)
		if got := len(audit.Entries); got != len(rejected) {
			t.Errorf("got %d audit entries of webhook.generic, want %d (one per recorded 401)", got, len(rejected))
		}

		all := events("")
		if got := storedBytes(all); got > 32<<10 {
			t.Errorf("got %d bytes of text in %d stored events, want at most 32 KiB", got, len(all))
		}
		// 45 MB of ids and 90 MB of bodies were sent.
		grew := h.dbBytes(t) - before
		t.Logf("%d events stored (%d bytes of text), %v unrecorded; the database grew by %d bytes", len(all), storedBytes(all), unrecorded, grew)
		if grew > 4<<20 {
			t.Errorf("the database grew by %d bytes, want at most 4 MiB", grew)
		}
	})
}

// TestWebhookDeliveryIDChecked: a delivery id of at most 200 printable
// ASCII characters is accepted; a longer one, or one with a space or a
// byte outside ASCII, gets 400 naming the header and stores nothing.
func TestWebhookDeliveryIDChecked(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "ids", dir, webhookSecret)
		db := h.openStore(t)
		body := genericPush(sha)
		tests := []struct {
			name       string
			id         string
			wantStatus int
			wantError  string
		}{
			{name: "200 characters", id: strings.Repeat("a", 200), wantStatus: http.StatusOK},
			{name: "201 characters", id: strings.Repeat("a", 201), wantStatus: http.StatusBadRequest, wantError: "X-Kici-Delivery header: 201 characters, want at most 200"},
			{name: "a space", id: "a b", wantStatus: http.StatusBadRequest, wantError: `X-Kici-Delivery header: byte 1 is 0x20, want printable ASCII (no spaces)`},
			{name: "not ascii", id: "d\xc3\xa9j\xc3\xa0", wantStatus: http.StatusBadRequest, wantError: `X-Kici-Delivery header: byte 1 is 0xc3, want printable ASCII (no spaces)`},
		}
		for _, tt := range tests {
			resp := h.deliver(t, delivery{route: "generic", source: "ids", id: tt.id, body: body, signature: sign(webhookSecret, body)})
			if resp.status != tt.wantStatus {
				t.Errorf("%s: got status %d (%s), want %d", tt.name, resp.status, resp.body, tt.wantStatus)
				continue
			}
			if tt.wantError != "" {
				if got := resp.apiError(t).Error; got != tt.wantError {
					t.Errorf("%s: got error %q, want %q", tt.name, got, tt.wantError)
				}
			}
		}
		list, err := db.ListWebhookEvents(t.Context(), "ids", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].DeliveryID != strings.Repeat("a", 200) || list[0].Verdict != "processed" {
			t.Errorf("got stored events %+v, want only the accepted one", list)
		}
		if got := len(h.runs(t, "ids")); got != 1 {
			t.Errorf("got %d runs, want 1", got)
		}
	})
}
