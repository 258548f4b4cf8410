package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MarkDelivery records that the webhook delivery deliveryID of source was
// received, to be remembered until expiresAt. It reports whether the
// delivery is new: false means it was seen before (and has not expired), so
// it must not be processed again. It is one insert-or-ignore statement, so
// of two concurrent calls for one delivery exactly one gets true. A record
// past its expiry that was not purged yet counts as absent and is renewed.
func (q *queries) MarkDelivery(ctx context.Context, source, deliveryID string, expiresAt time.Time) (bool, error) {
	changed, err := q.execChanged(ctx,
		`INSERT INTO delivery_dedup (source, delivery_id, expires_at) VALUES (?, ?, ?)
		 ON CONFLICT (source, delivery_id) DO UPDATE SET expires_at = excluded.expires_at
		 WHERE delivery_dedup.expires_at <= ?`,
		source, deliveryID, timeArg(expiresAt), timeArg(q.clock.Now()))
	if err != nil {
		return false, fmt.Errorf("mark delivery %q of source %q: %w", deliveryID, source, err)
	}
	return changed, nil
}

// DeliverySeen reports whether the delivery is recorded and not expired.
func (q *queries) DeliverySeen(ctx context.Context, source, deliveryID string) (bool, error) {
	seen, err := q.exists(ctx,
		"SELECT 1 FROM delivery_dedup WHERE source = ? AND delivery_id = ? AND expires_at > ?",
		source, deliveryID, timeArg(q.clock.Now()))
	if err != nil {
		return false, fmt.Errorf("look up delivery %q of source %q: %w", deliveryID, source, err)
	}
	return seen, nil
}

// PurgeExpiredDeliveries deletes the delivery records that expired at or
// before now, and returns how many it deleted.
func (q *queries) PurgeExpiredDeliveries(ctx context.Context, now time.Time) (int64, error) {
	res, err := q.exec(ctx, "DELETE FROM delivery_dedup WHERE expires_at <= ?", timeArg(now))
	if err != nil {
		return 0, fmt.Errorf("purge expired deliveries: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purge expired deliveries: count rows: %w", err)
	}
	return n, nil
}

// WebhookEvent is one entry of the webhook delivery log. Every text
// field may come from an unauthenticated sender, so RecordWebhookEvent
// stores each one bounded (see the max* constants below), as valid UTF-8
// with control characters replaced. The body of a delivery is stored
// only for the verdicts in BodyVerdicts (signed deliveries that were
// processed), so that it can be redelivered; never for a rejected one.
type WebhookEvent struct {
	// ID is empty on input to mean NewID.
	ID         string
	Source     string
	DeliveryID string
	// Kind is the provider's event name (push, pull_request, ping, …).
	Kind string
	// Verdict is what became of the delivery (accepted, rejected_signature,
	// duplicate, ignored, …); the caller's vocabulary.
	Verdict string
	// Detail explains the verdict in words.
	Detail string
	// RunIDs are the runs the delivery started.
	RunIDs []string
	// ClientAddr is the address of the client that sent the delivery.
	ClientAddr string
	// UserAgent is the delivery's User-Agent header.
	UserAgent string
	// BodyBytes is the size of the delivery's body in bytes (for a body
	// over the limit, its Content-Length, or the limit plus one).
	BodyBytes int64
	// ReceivedAt is zero on input to mean now.
	ReceivedAt time.Time
	// Error is what went wrong, bounded to maxEventError bytes; for an
	// invalid workflow, one "FILE:LINE:COL: message" per line.
	Error string
	// Provider is the endpoint the delivery came to: github or generic.
	Provider string
	// Body is the delivery's body, kept (up to MaxEventBody bytes) only
	// when Verdict is one of BodyVerdicts; RecordWebhookEvent drops it
	// otherwise. ListWebhookEventsPage leaves it nil; GetWebhookEvent
	// reads it.
	Body []byte
	// RedeliveryOf is, for a redelivery, the ID of the event re-run.
	RedeliveryOf string
	// HasBody, on output, says whether the body was kept.
	HasBody bool
}

// BodyVerdicts are the verdicts whose delivery keeps its body: signed
// deliveries that started runs or were refused only for an invalid
// workflow, the ones worth running again.
var BodyVerdicts = []string{"processed", "invalid_workflow"}

// MaxEventBody bounds a stored delivery body in bytes: a longer one is
// not stored at all (a cut body would not parse).
const MaxEventBody = 25 << 20

// Bounds of the text fields of a stored WebhookEvent, in bytes. A longer
// value is cut at a character boundary and ends in "…".
const (
	maxEventSource     = 64
	maxEventDeliveryID = 200
	maxEventKind       = 64
	maxEventDetail     = 512
	maxEventClientAddr = 64
	maxEventUserAgent  = 200
	maxEventRunIDs     = 100
	maxEventError      = 8192
)

const webhookEventColumns = "id, source, delivery_id, kind, verdict, detail, run_ids, client_addr, user_agent, body_bytes, received_at, error, provider, redelivery_of"

// RecordWebhookEvent appends ev to the delivery log, each field bounded,
// and returns it as stored.
func (q *queries) RecordWebhookEvent(ctx context.Context, ev WebhookEvent) (WebhookEvent, error) {
	if ev.ID == "" {
		ev.ID = NewID()
	}
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = q.clock.Now()
	}
	ev.ReceivedAt = normTime(ev.ReceivedAt)
	if ev.RunIDs == nil {
		ev.RunIDs = []string{}
	}
	if ev.Verdict == "" {
		return WebhookEvent{}, errors.New("record webhook event: Verdict is empty")
	}
	if len(ev.RunIDs) > maxEventRunIDs {
		ev.RunIDs = ev.RunIDs[:maxEventRunIDs]
	}
	ev.Source = BoundText(ev.Source, maxEventSource)
	ev.DeliveryID = BoundText(ev.DeliveryID, maxEventDeliveryID)
	ev.Kind = BoundText(ev.Kind, maxEventKind)
	ev.Verdict = BoundText(ev.Verdict, maxEventKind)
	ev.Detail = BoundText(ev.Detail, maxEventDetail)
	ev.ClientAddr = BoundText(ev.ClientAddr, maxEventClientAddr)
	ev.UserAgent = BoundText(ev.UserAgent, maxEventUserAgent)
	ev.BodyBytes = max(ev.BodyBytes, 0)
	ev.Error = boundLines(ev.Error, maxEventError)
	ev.Provider = BoundText(ev.Provider, maxEventKind)
	ev.RedeliveryOf = BoundText(ev.RedeliveryOf, maxEventSource)
	if !slices.Contains(BodyVerdicts, ev.Verdict) || len(ev.Body) == 0 || len(ev.Body) > MaxEventBody {
		ev.Body = nil
	}
	var body any // NULL when there is none
	if ev.Body != nil {
		body = ev.Body
	}
	ev.HasBody = ev.Body != nil
	_, err := q.exec(ctx,
		"INSERT INTO webhook_events ("+webhookEventColumns+", body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		ev.ID, ev.Source, ev.DeliveryID, ev.Kind, ev.Verdict, ev.Detail, stringsArg(ev.RunIDs),
		ev.ClientAddr, ev.UserAgent, ev.BodyBytes, timeArg(ev.ReceivedAt), ev.Error, ev.Provider, ev.RedeliveryOf, body)
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("record webhook event %q of source %q: %w", ev.DeliveryID, ev.Source, classify(err))
	}
	return ev, nil
}

// BoundText returns s as valid UTF-8 of at most maxBytes bytes: invalid
// bytes and control characters (a NUL would not even fit a PostgreSQL
// text column) become U+FFFD, and a longer value is cut at a character
// boundary and ends in "…". maxBytes is at least 3, the size of "…".
func BoundText(s string, maxBytes int) string {
	const ellipsis = "…"
	var b strings.Builder
	cut := 0 // the length of b at the last character that leaves room for the ellipsis
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > maxBytes {
			return b.String()[:cut] + ellipsis
		}
		b.WriteRune(r)
		if b.Len() <= maxBytes-len(ellipsis) {
			cut = b.Len()
		}
	}
	return b.String()
}

// ListWebhookEvents returns the newest events of a source ("" for every
// source), newest first. A limit of zero means 50, and more than 1000 means
// 1000.
func (q *queries) ListWebhookEvents(ctx context.Context, source string, limit int) ([]WebhookEvent, error) {
	switch {
	case limit <= 0:
		limit = 50
	case limit > 1000:
		limit = 1000
	}
	return q.ListWebhookEventsPage(ctx, source, nil, limit)
}

// WebhookEventCursor is where a page of ListWebhookEventsPage starts: the
// events strictly older than this one (by receipt time, then id).
type WebhookEventCursor struct {
	ReceivedAt time.Time
	ID         string
}

// ListWebhookEventsPage returns up to limit events of a source ("" for
// every source), newest first, after cursor (nil: from the newest), without
// their bodies.
func (q *queries) ListWebhookEventsPage(ctx context.Context, source string, after *WebhookEventCursor, limit int) ([]WebhookEvent, error) {
	if limit < 1 {
		return nil, fmt.Errorf("list webhook events: limit %d: want at least 1", limit)
	}
	query := "SELECT " + webhookEventColumns + ", body IS NOT NULL FROM webhook_events WHERE 1 = 1"
	var args []any
	if source != "" {
		query += " AND source = ?"
		args = append(args, source)
	}
	if after != nil {
		query += " AND (received_at < ? OR (received_at = ? AND id < ?))"
		args = append(args, timeArg(after.ReceivedAt), timeArg(after.ReceivedAt), after.ID)
	}
	query += " ORDER BY received_at DESC, id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list webhook events: %w", err)
	}
	defer rows.Close()
	var out []WebhookEvent
	for rows.Next() {
		var ev WebhookEvent
		if err := rows.Scan(append(webhookEventDest(&ev), &ev.HasBody)...); err != nil {
			return nil, fmt.Errorf("list webhook events: %w", err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list webhook events: %w", err)
	}
	return out, nil
}

// GetWebhookEvent returns the event id of source, with its body (nil when
// none was kept), or ErrNotFound.
func (q *queries) GetWebhookEvent(ctx context.Context, source, id string) (WebhookEvent, error) {
	var ev WebhookEvent
	var body []byte
	err := q.queryRow(ctx, "SELECT "+webhookEventColumns+", body FROM webhook_events WHERE source = ? AND id = ?", source, id).
		Scan(append(webhookEventDest(&ev), &body)...)
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("webhook event %q of source %q: %w", id, source, classify(err))
	}
	if len(body) > 0 {
		ev.Body, ev.HasBody = body, true
	}
	return ev, nil
}

// webhookEventDest are the scan destinations of webhookEventColumns.
func webhookEventDest(ev *WebhookEvent) []any {
	return []any{&ev.ID, &ev.Source, &ev.DeliveryID, &ev.Kind, &ev.Verdict, &ev.Detail,
		jsonCol[[]string]{&ev.RunIDs}, &ev.ClientAddr, &ev.UserAgent, &ev.BodyBytes, timeCol{&ev.ReceivedAt},
		&ev.Error, &ev.Provider, &ev.RedeliveryOf}
}

// boundLines is BoundText for a text of lines: each line is cleaned as
// BoundText cleans, and a text over maxBytes keeps the whole lines that
// fit and ends in a line "…".
func boundLines(s string, maxBytes int) string {
	const ellipsis = "…"
	if s == "" {
		return ""
	}
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		l = BoundText(l, maxBytes-len(ellipsis)-1)
		sep := ""
		if i > 0 {
			sep = "\n"
		}
		if b.Len()+len(sep)+len(l) > maxBytes-len(ellipsis)-1 {
			if b.Len() == 0 {
				return ellipsis
			}
			return b.String() + "\n" + ellipsis
		}
		b.WriteString(sep + l)
	}
	return b.String()
}

// ForgetDelivery removes a delivery id recorded by MarkDelivery, so that a
// redelivery is processed again. The webhook handler calls it when
// processing failed after the mark (a source that could not be read), so
// the provider's redelivery is not refused as a duplicate.
func (q *queries) ForgetDelivery(ctx context.Context, source, deliveryID string) error {
	if _, err := q.exec(ctx, "DELETE FROM delivery_dedup WHERE source = ? AND delivery_id = ?", source, deliveryID); err != nil {
		return fmt.Errorf("forget delivery %q of source %q: %w", deliveryID, source, classify(err))
	}
	return nil
}
