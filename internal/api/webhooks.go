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

	"github.com/kici-dev/kici/internal/pipeline"
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
	// verdictInvalidWorkflow is a signed delivery whose commit has an
	// invalid workflow file: the valid files' runs started (see its
	// run_ids), the invalid ones are listed in its error.
	verdictInvalidWorkflow = "invalid_workflow"
)

// Webhook providers, as stored with each delivery so that a redelivery
// decodes the body the same way.
const (
	providerGitHub     = "github"
	providerGitHubForm = "github-form" // GitHub's form content type: the JSON is the field "payload"
	providerGeneric    = "generic"
)

// normalizer decodes the body of provider's delivery of kind.
func normalizer(provider, kind string) func([]byte) (trigger.Event, error) {
	switch provider {
	case providerGitHub, providerGitHubForm:
		return func(body []byte) (trigger.Event, error) {
			if provider == providerGitHubForm {
				// The signature covers the form body.
				var err error
				if body, err = formPayload(body); err != nil {
					return trigger.Event{}, fmt.Errorf("github %s delivery: %w", kind, err)
				}
			}
			return trigger.NormalizeGitHub(kind, body)
		}
	case providerGeneric:
		return trigger.NormalizeGeneric
	}
	return func([]byte) (trigger.Event, error) {
		return trigger.Event{}, fmt.Errorf("unknown webhook provider %q", provider)
	}
}

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
	provider := providerGitHub
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "application/x-www-form-urlencoded" {
		// A webhook set to the form content type sends the JSON as the
		// field "payload".
		provider = providerGitHubForm
	}
	s.webhook(w, r, provider, "X-GitHub-Delivery", kind)
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
	s.webhook(w, r, providerGeneric, "X-Kici-Delivery", "push")
}

// webhook verifies, dedups, records and runs one delivery, whose id is
// in the header idHeader.
//
// A delivery id that is too long or not printable ASCII is refused (400)
// before anything else and stores nothing. Every other delivery gets a
// row in the delivery log with its metadata, and a signed one that ran
// (processed, invalid_workflow) its body too, for a redelivery; for one
// rejected before its signature was checked (unknown source, body too
// large, no webhook secret, bad signature) the row, the audit entry of a
// 401 and the warning logged are sampled by s.rejects.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request, provider, idHeader, kind string) {
	s.cfg.Metrics.WebhookReceived(provider, kind)
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
	var body []byte
	recordOutcome := func(o deliveryOutcome) {
		s.cfg.Metrics.Delivery(o.verdict, len(o.runIDs))
		_, err := s.db.RecordWebhookEvent(context.WithoutCancel(ctx), store.WebhookEvent{Source: name, DeliveryID: deliveryID, Kind: kind,
			Verdict: o.verdict, Detail: o.detail, Error: o.errText, RunIDs: o.runIDs, ClientAddr: client, UserAgent: r.UserAgent(),
			BodyBytes: bodyBytes, Provider: provider, Body: body})
		if err != nil {
			s.log.Error("record webhook event failed", "source", store.BoundText(name, 64), "error", err)
		}
	}
	record := func(verdict, detail string, runIDs []string) {
		recordOutcome(deliveryOutcome{verdict: verdict, detail: detail, runIDs: runIDs})
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
		s.log.Warn("webhook delivery rejected", "source", store.BoundText(name, 64), "verdict", verdict,
			"detail", detail, "client", client, "delivery", deliveryID)
		recordOutcome(deliveryOutcome{verdict: verdict, detail: detail, errText: detail})
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
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxWebhookBody))
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
	ev, err := normalizer(provider, kind)(body)
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
		s.log.Warn("webhook delivery rejected", "source", name, "verdict", verdictInvalid, "detail", err.Error(), "client", client, "delivery", deliveryID)
		recordOutcome(deliveryOutcome{verdict: verdictInvalid, detail: err.Error(), errText: err.Error()})
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
	o := s.runDelivery(ctx, name, ev)
	if o.err != nil && deliveryID != "" && len(o.runIDs) == 0 {
		// Nothing was started: let the provider's redelivery try again.
		if ferr := s.db.ForgetDelivery(context.WithoutCancel(ctx), name, deliveryID); ferr != nil {
			s.log.Error("forget failed delivery", "source", name, "error", ferr)
		}
	}
	recordOutcome(o)
	s.writeOutcome(w, name, o)
}

// deliveryOutcome is what running a delivery's event did, as recorded in
// the delivery log.
type deliveryOutcome struct {
	verdict, detail string
	// errText is the delivery's error: for an invalid workflow, one
	// FILE:LINE:COL: message per line.
	errText string
	runIDs  []string
	res     pipeline.Result
	// err is the pipeline's error, answered by pipelineError.
	err error
}

// runDelivery runs the pipeline for a verified delivery's event. A commit
// with invalid workflow files next to valid ones runs the valid ones: the
// verdict is invalid_workflow either way, with the runs that started.
func (s *Server) runDelivery(ctx context.Context, name string, ev trigger.Event) deliveryOutcome {
	res, err := s.pipe.Trigger(ctx, name, ev)
	var wfErr *pipeline.WorkflowError
	switch {
	case errors.As(err, &wfErr):
		return deliveryOutcome{verdict: verdictInvalidWorkflow, detail: fmt.Sprintf("workflows at %.12s are invalid; no run started", wfErr.SHA),
			errText: wfErr.Err.Error(), err: err}
	case err != nil:
		return deliveryOutcome{verdict: verdictFailed, detail: err.Error(), errText: err.Error(), err: err}
	case res.Ignored != "":
		return deliveryOutcome{verdict: verdictIgnored, detail: res.Ignored}
	}
	ids := []string{}
	for _, run := range res.Runs {
		ids = append(ids, run.ID)
	}
	o := deliveryOutcome{verdict: verdictProcessed, detail: fmt.Sprintf("%d run(s)", len(ids)), runIDs: ids, res: res}
	if res.Invalid != nil {
		o.verdict, o.errText = verdictInvalidWorkflow, res.Invalid.Err.Error()
		o.detail = fmt.Sprintf("%d run(s); some workflows at %.12s are invalid and did not run", len(ids), res.Invalid.SHA)
	}
	return o
}

// writeOutcome answers a delivery with what running it did.
func (s *Server) writeOutcome(w http.ResponseWriter, name string, o deliveryOutcome) {
	switch {
	case o.err != nil:
		s.pipelineError(w, name, o.err)
	case o.verdict == verdictIgnored:
		writeJSON(w, http.StatusOK, map[string]any{"ignored": true, "reason": o.detail})
	default:
		writeJSON(w, http.StatusOK, triggerResponse(o.res))
	}
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
	s.cfg.Metrics.Delivery(verdict, 0)
}
