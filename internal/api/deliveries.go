package api

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/store"
)

// Paging of GET /api/v1/sources/{name}/deliveries.
const (
	defaultDeliveriesLimit = 50
	maxDeliveriesLimit     = 1000
)

// The verdicts of the delivery listing (CONTRACT.md § Triggers). The log
// and the metric keep their own, finer names; contractVerdict maps them.
const (
	listAccepted          = "accepted"
	listDuplicate         = "duplicate"
	listIgnored           = "ignored"
	listRejectedSignature = "rejected_signature"
	listInvalidPayload    = "invalid_payload"
	listInvalidWorkflow   = "invalid_workflow"
	listNoMatch           = "no_match"
	listFailed            = "failed"
)

// contractVerdict names a recorded verdict with the listing's vocabulary,
// and says whether the recorded name differs (it then leads the detail).
// A processed delivery is accepted when it started a run and no_match when
// it did not; a body over the limit is an invalid payload; a delivery to a
// source that did not exist could not be authenticated (rejected_signature);
// a source without a usable webhook secret is the orchestrator's failure.
func contractVerdict(recorded string, runs int) (verdict string, renamed bool) {
	switch recorded {
	case verdictProcessed:
		if runs == 0 {
			return listNoMatch, false
		}
		return listAccepted, false
	case verdictDuplicate, verdictIgnored, verdictBadSignature, verdictInvalid, verdictInvalidWorkflow, verdictFailed:
		return recorded, false
	case verdictTooLarge:
		return listInvalidPayload, true
	case verdictUnknownSource:
		return listRejectedSignature, true
	}
	return listFailed, true
}

// toAPIDelivery is a delivery log row as the listing shows it.
func toAPIDelivery(ev store.WebhookEvent) apiv1.Delivery {
	verdict, renamed := contractVerdict(ev.Verdict, len(ev.RunIDs))
	detail := ev.Detail
	if renamed {
		detail = strings.TrimSuffix(ev.Verdict+": "+detail, ": ")
	}
	errText := ev.Error
	if errText == "" && verdict != listAccepted && verdict != listNoMatch && verdict != listDuplicate && verdict != listIgnored {
		// A row from before the error was kept apart.
		errText = ev.Detail
	}
	runs := ev.RunIDs
	if runs == nil {
		runs = []string{}
	}
	return apiv1.Delivery{
		ID: ev.ID, DeliveryID: ev.DeliveryID, Event: ev.Kind, ReceivedAt: ev.ReceivedAt,
		Verdict: verdict, Detail: detail, Error: errText, Runs: runs,
		ClientAddr: ev.ClientAddr, UserAgent: ev.UserAgent, BodyBytes: ev.BodyBytes,
		Redeliverable: ev.HasBody, RedeliveryOf: ev.RedeliveryOf,
	}
}

// listDeliveries lists a source's deliveries newest first, a page of
// ?limit= rows (default 50, at most 1000) after ?cursor= (the next_cursor
// of the page before).
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	audited(r, "source:"+name, "")
	q := r.URL.Query()
	limit := defaultDeliveriesLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxDeliveriesLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to %d", clip(v, 64), maxDeliveriesLimit))
			return
		}
		limit = n
	}
	var after *store.WebhookEventCursor
	if v := q.Get("cursor"); v != "" {
		c, err := decodeDeliveryCursor(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("cursor %q: %v", clip(v, 64), err))
			return
		}
		after = &c
	}
	if _, err := s.db.GetSource(r.Context(), name); err != nil {
		s.storeError(w, fmt.Sprintf("source %q", name), err)
		return
	}
	// One row more than the page says whether another page follows.
	rows, err := s.db.ListWebhookEventsPage(r.Context(), name, after, limit+1)
	if err != nil {
		s.storeError(w, "list deliveries", err)
		return
	}
	out := apiv1.DeliveryList{Deliveries: make([]apiv1.Delivery, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		out.NextCursor = encodeDeliveryCursor(store.WebhookEventCursor{ReceivedAt: last.ReceivedAt, ID: last.ID})
	}
	for _, ev := range rows {
		out.Deliveries = append(out.Deliveries, toAPIDelivery(ev))
	}
	writeJSON(w, http.StatusOK, out)
}

// encodeDeliveryCursor makes the opaque next_cursor of a page: the receipt
// time (microseconds, the store's precision) and id of its last row.
func encodeDeliveryCursor(c store.WebhookEventCursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "d/%d/%s", c.ReceivedAt.UnixMicro(), c.ID))
}

// decodeDeliveryCursor reads a cursor made by encodeDeliveryCursor.
func decodeDeliveryCursor(v string) (store.WebhookEventCursor, error) {
	if len(v) > maxCursorLen {
		return store.WebhookEventCursor{}, errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return store.WebhookEventCursor{}, errBadCursor
	}
	rest, ok := strings.CutPrefix(string(raw), "d/")
	micros, id, ok2 := strings.Cut(rest, "/")
	n, err := strconv.ParseInt(micros, 10, 64)
	if !ok || !ok2 || err != nil || n < 0 || id == "" || strings.ContainsFunc(id, func(r rune) bool { return r < ' ' || r > '~' }) {
		return store.WebhookEventCursor{}, errBadCursor
	}
	return store.WebhookEventCursor{ReceivedAt: time.UnixMicro(n).UTC(), ID: id}, nil
}

// redeliver runs a stored delivery again: its kept body (only an accepted
// or invalid_workflow delivery keeps one) goes through the pipeline as a
// new delivery linked to the original, never refused by the delivery-id
// dedup.
func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("name"), r.PathValue("id")
	audited(r, "source:"+name, "redeliver "+clip(id, 64))
	ctx := r.Context()
	orig, err := s.db.GetWebhookEvent(ctx, name, id)
	if err != nil {
		s.storeError(w, fmt.Sprintf("delivery %q of source %q", clip(id, 64), name), err)
		return
	}
	if orig.Body == nil {
		verdict, _ := contractVerdict(orig.Verdict, len(orig.RunIDs))
		writeError(w, http.StatusConflict, fmt.Sprintf("delivery %q is %s and kept no body: only an accepted or invalid_workflow delivery can be redelivered", id, verdict))
		return
	}
	ev, err := normalizer(orig.Provider, orig.Kind)(orig.Body)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("delivery %q: decode its body: %v", id, err))
		return
	}
	o := s.runDelivery(ctx, name, ev)
	stored, err := s.db.RecordWebhookEvent(ctx, store.WebhookEvent{Source: name, DeliveryID: orig.DeliveryID, Kind: orig.Kind,
		Verdict: o.verdict, Detail: o.detail, Error: o.errText, RunIDs: o.runIDs, ClientAddr: s.clientAddr(r), UserAgent: r.UserAgent(),
		BodyBytes: orig.BodyBytes, Provider: orig.Provider, Body: orig.Body, RedeliveryOf: orig.ID})
	if err != nil {
		s.storeError(w, "record redelivery", err)
		return
	}
	audited(r, "", fmt.Sprintf("redeliver %s: delivery %s, %s, runs [%s]", orig.ID, stored.ID, o.verdict, strings.Join(o.runIDs, ", ")))
	if o.err != nil {
		s.pipelineError(w, name, o.err)
		return
	}
	out := apiv1.Redelivery{Delivery: toAPIDelivery(stored), TriggerResponse: triggerResponse(o.res)}
	writeJSON(w, http.StatusOK, out)
}
