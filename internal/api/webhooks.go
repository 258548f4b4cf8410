package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/trigger"
)

// dedupWindow is how long a delivery id is remembered.
const dedupWindow = 24 * time.Hour

// maxDeliveryID bounds a delivery id header (X-GitHub-Delivery,
// X-Kici-Delivery), in characters.
const maxDeliveryID = 200

// Webhook verdicts recorded in the event log.
const (
	verdictProcessed     = "processed"
	verdictDuplicate     = "duplicate"
	verdictIgnored       = "ignored"
	verdictBadSignature  = "rejected_signature"
	verdictMisconfigured = "rejected_misconfigured"
	verdictUnknownSource = "rejected_unknown_source"
	verdictTooLarge      = "rejected_too_large"
	// verdictBadDeliveryID is only counted: such a delivery stores nothing.
	verdictBadDeliveryID = "rejected_delivery_id"
	verdictInvalid       = "invalid_payload"
	verdictFailed        = "failed"
)

// checkDeliveryID reports what is wrong with a delivery id header value:
// more than maxDeliveryID characters, or a character that is not
// printable ASCII. An empty id (no header) is fine.
func checkDeliveryID(id string) error {
	if len(id) > maxDeliveryID {
		return fmt.Errorf("%d characters, want at most %d", len(id), maxDeliveryID)
	}
	for i := range len(id) {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("byte %d is %#02x, want printable ASCII (no spaces)", i, c)
		}
	}
	return nil
}

// checkSignature reports whether sig ("sha256=<hex>") is the HMAC-SHA256
// of body under any of the secrets. A malformed header is simply invalid.
func checkSignature(sig string, body []byte, secrets []string) bool {
	hexSum, ok := strings.CutPrefix(sig, "sha256=")
	if !ok || len(hexSum) != 64 {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	match := false
	for _, s := range secrets {
		mac := hmac.New(sha256.New, []byte(s))
		mac.Write(body)
		// Compare against every secret, so the time taken does not tell
		// which one (or whether any) matched.
		if hmac.Equal(got, mac.Sum(nil)) {
			match = true
		}
	}
	return match
}

func (s *Server) githubWebhook(w http.ResponseWriter, r *http.Request) {
	kind := r.Header.Get("X-GitHub-Event")
	form := false
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "application/x-www-form-urlencoded" {
		form = true
	}
	s.webhook(w, r, "X-GitHub-Delivery", kind, func(body []byte) (trigger.Event, error) {
		if form {
			// A webhook set to the form content type sends the JSON as
			// the field "payload"; the signature covers the form body.
			var err error
			if body, err = formPayload(body); err != nil {
				return trigger.Event{}, fmt.Errorf("github %s delivery: %w", kind, err)
			}
		}
		return trigger.NormalizeGitHub(kind, body)
	})
}

// formPayload returns the "payload" field of a form-encoded GitHub
// delivery body.
func formPayload(body []byte) ([]byte, error) {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("decode form body: %w", err)
	}
	payload := vals.Get("payload")
	if payload == "" {
		return nil, errors.New(`form body has no form field "payload"`)
	}
	return []byte(payload), nil
}

func (s *Server) genericWebhook(w http.ResponseWriter, r *http.Request) {
	s.webhook(w, r, "X-Kici-Delivery", "push", trigger.NormalizeGeneric)
}

// webhook verifies, dedups, records and runs one delivery, whose id is
// in the header idHeader.
//
// A delivery id that is too long or not printable ASCII is refused (400)
// before anything else and stores nothing. Every other delivery gets a
// row in the delivery log with its metadata (never its body); for one
// rejected before its signature was checked (unknown source, body too
// large, no webhook secret, bad signature) the row, and the audit entry
// of a 401, are sampled by s.rejects.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request, idHeader, kind string, normalize func([]byte) (trigger.Event, error)) {
	name := r.PathValue("source")
	ctx := r.Context()
	deliveryID := r.Header.Get(idHeader)
	if err := checkDeliveryID(deliveryID); err != nil {
		s.countDelivery(verdictBadDeliveryID)
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s header: %v", idHeader, err))
		return
	}
	client := s.clientAddr(r)
	var bodyBytes int64
	record := func(verdict, detail string, runIDs []string) {
		s.countDelivery(verdict)
		if runIDs == nil {
			runIDs = []string{}
		}
		_, err := s.db.RecordWebhookEvent(context.WithoutCancel(ctx), store.WebhookEvent{Source: name, DeliveryID: deliveryID, Kind: kind,
			Verdict: verdict, Detail: detail, RunIDs: runIDs, ClientAddr: client, UserAgent: r.UserAgent(), BodyBytes: bodyBytes})
		if err != nil {
			s.log.Error("record webhook event failed", "source", store.BoundText(name, 64), "error", err)
		}
	}
	// reject records a delivery refused before it was authenticated, if
	// the sampler lets it, keyed by sampleAs (the source, or "" for one
	// that does not exist).
	reject := func(sampleAs, verdict, detail string) {
		ok, dropped := s.rejects.admit(rejectKey{source: sampleAs, client: client})
		if !ok {
			s.countDelivery(verdict)
			if s.cfg.Metrics != nil {
				s.cfg.Metrics.WebhookUnrecorded.Inc()
			}
			skipAudit(r)
			return
		}
		if dropped > 0 {
			detail += fmt.Sprintf(" (and %d earlier rejected deliveries of this source from this address not recorded: over %d a minute)", dropped, s.rejects.perKey)
		}
		record(verdict, detail, nil)
	}
	src, err := s.lookupWebhookSource(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		reject("", verdictUnknownSource, "no source of this name")
		writeError(w, http.StatusNotFound, fmt.Sprintf("source %q: not found", store.BoundText(name, 64)))
		return
	}
	if err != nil {
		s.storeError(w, fmt.Sprintf("source %q", name), err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxWebhookBody))
	bodyBytes = int64(len(body))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			bodyBytes = max(r.ContentLength, tooBig.Limit+1)
			msg := fmt.Sprintf("webhook body over %d bytes", tooBig.Limit)
			reject(name, verdictTooLarge, msg)
			writeError(w, http.StatusRequestEntityTooLarge, msg)
			return
		}
		reject(name, verdictInvalid, "read body: "+err.Error())
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	if len(src.WebhookSecrets) == 0 {
		reject(name, verdictMisconfigured, "source has no webhook secret")
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("source %q has no webhook secret configured; add one to accept webhooks", name))
		return
	}
	hmacKeys := src.WebhookSecrets
	if s.cfg.Secrets != nil {
		if hmacKeys, err = s.cfg.Secrets.OpenWebhookSecrets(name, src.WebhookSecrets); err != nil {
			s.log.Error("open webhook secrets failed", "source", name, "error", err)
			reject(name, verdictMisconfigured, "webhook secret does not open with the secret key in use")
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("the webhook secret of source %q cannot be opened with the orchestrator's secret key; see its log", name))
			return
		}
	}
	if !checkSignature(r.Header.Get("X-Hub-Signature-256"), body, hmacKeys) {
		reject(name, verdictBadSignature, "X-Hub-Signature-256 does not match")
		writeError(w, http.StatusUnauthorized, "signature missing or invalid (X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>)")
		return
	}
	ev, err := normalize(body)
	var ignored *trigger.IgnoredError
	if errors.As(err, &ignored) {
		record(verdictIgnored, ignored.Reason, nil)
		writeJSON(w, http.StatusOK, map[string]any{"ignored": true, "reason": ignored.Reason})
		return
	}
	if errors.Is(err, trigger.ErrBodyTooLarge) {
		record(verdictTooLarge, err.Error(), nil)
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	if err != nil {
		record(verdictInvalid, err.Error(), nil)
		writeError(w, http.StatusBadRequest, "invalid payload: "+err.Error())
		return
	}
	if deliveryID != "" {
		fresh, err := s.db.MarkDelivery(ctx, name, deliveryID, s.cfg.Now().Add(dedupWindow))
		if err != nil {
			s.storeError(w, "record delivery", err)
			return
		}
		if !fresh {
			record(verdictDuplicate, "delivery id seen within 24h", nil)
			writeJSON(w, http.StatusOK, map[string]any{"duplicate": true})
			return
		}
	}
	res, err := s.pipe.Trigger(ctx, name, ev)
	if err != nil {
		if deliveryID != "" && len(res.Runs) == 0 {
			// Nothing was started: let the provider's redelivery try again.
			if ferr := s.db.ForgetDelivery(context.WithoutCancel(ctx), name, deliveryID); ferr != nil {
				s.log.Error("forget failed delivery", "source", name, "error", ferr)
			}
		}
		record(verdictFailed, err.Error(), nil)
		s.pipelineError(w, name, err)
		return
	}
	if res.Ignored != "" {
		record(verdictIgnored, res.Ignored, nil)
		writeJSON(w, http.StatusOK, map[string]any{"ignored": true, "reason": res.Ignored})
		return
	}
	var ids []string
	for _, run := range res.Runs {
		ids = append(ids, run.ID)
	}
	record(verdictProcessed, fmt.Sprintf("%d run(s)", len(ids)), ids)
	writeJSON(w, http.StatusOK, triggerResponse(res))
}

// lookupWebhookSource returns the source a delivery names. A name that
// breaks the source-name rule is not looked up: no such source exists.
func (s *Server) lookupWebhookSource(ctx context.Context, name string) (store.Source, error) {
	if !sourceNameRE.MatchString(name) {
		return store.Source{}, fmt.Errorf("source %q: %w", store.BoundText(name, 64), store.ErrNotFound)
	}
	return s.db.GetSource(ctx, name)
}

// countDelivery counts a delivery in the verdict metric.
func (s *Server) countDelivery(verdict string) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.WebhookDeliveries.WithLabelValues(verdict).Inc()
	}
}
