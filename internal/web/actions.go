package web

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/scaler"
)

// The dashboard's mutations. Each is a form post carrying the session's
// CSRF token (checked by withSession), served by the API route it mirrors
// for the session's principal, so the role's permission and the audit log
// are the API's; on success it redirects to the page that shows the
// result.

// rerun starts a new run of the same commit and workflow; with the form
// field failed=1, one that runs only the jobs that did not succeed.
func (h *Handler) rerun(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	var child apiv1.Run
	var body any
	if r.PostFormValue("failed") == "1" {
		body = apiv1.RerunRequest{Failed: true}
	}
	if err := h.call(r.Context(), s.Principal, http.MethodPost, "/api/v1/runs/"+pathEscape(r.PathValue("id"))+"/rerun", body, &child); err != nil {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/runs/"+pathEscape(child.ID), http.StatusSeeOther)
}

// approve starts a fork's run that awaits approval.
func (h *Handler) approve(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	id := r.PathValue("id")
	if err := h.call(r.Context(), s.Principal, http.MethodPost, "/api/v1/runs/"+pathEscape(id)+"/approve", nil, nil); err != nil {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/runs/"+pathEscape(id), http.StatusSeeOther)
}

// drain stops an agent from taking new jobs; undrain lets it again.
func (h *Handler) drain(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	body := apiv1.AgentDrainRequest{Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	if err := h.call(r.Context(), s.Principal, http.MethodPost, "/api/v1/agents/"+pathEscape(r.PathValue("id"))+"/drain", body, nil); err != nil {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/agents", http.StatusSeeOther)
}

func (h *Handler) undrain(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	if err := h.call(r.Context(), s.Principal, http.MethodDelete, "/api/v1/agents/"+pathEscape(r.PathValue("id"))+"/drain", nil, nil); err != nil {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/agents", http.StatusSeeOther)
}

// stopOrphan stops one untracked piece of scaler compute.
func (h *Handler) stopOrphan(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	id := r.PostFormValue("id")
	var out struct {
		Outcomes []scaler.StopOutcome `json:"outcomes"`
	}
	if err := h.call(r.Context(), s.Principal, http.MethodPost, "/api/v1/scalers/orphans/stop", map[string]any{"ids": []string{id}}, &out); err != nil {
		h.fail(w, r, s, err)
		return
	}
	if len(out.Outcomes) == 1 && out.Outcomes[0].Outcome != scaler.OutcomeStopped {
		h.fail(w, r, s, &apiError{Status: http.StatusConflict, Message: fmt.Sprintf("%s not stopped (%s): %s", id, out.Outcomes[0].Outcome, out.Outcomes[0].Error)})
		return
	}
	http.Redirect(w, r, "/scalers", http.StatusSeeOther)
}

// maxInputs bounds the inputs of a manual run from the form.
const maxInputs = 50

// trigger starts a run of a source: manual (with inputs, one NAME=VALUE
// per line) or push, on a ref (the default branch when empty).
func (h *Handler) trigger(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	in := apiv1.TriggerRequest{Event: r.PostFormValue("event"), Ref: strings.TrimSpace(r.PostFormValue("ref"))}
	if in.Event != "manual" && in.Event != "push" {
		h.fail(w, r, s, &apiError{Status: http.StatusBadRequest, Message: "event: want manual or push"})
		return
	}
	sc := bufio.NewScanner(strings.NewReader(r.PostFormValue("inputs")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			h.fail(w, r, s, &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf("input %q: want NAME=VALUE, one per line", line)})
			return
		}
		if in.Inputs == nil {
			in.Inputs = map[string]string{}
		}
		if len(in.Inputs) == maxInputs {
			h.fail(w, r, s, &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf("at most %d inputs", maxInputs)})
			return
		}
		in.Inputs[strings.TrimSpace(k)] = v
	}
	var out apiv1.TriggerResponse
	if err := h.call(r.Context(), s.Principal, http.MethodPost, "/api/v1/sources/"+pathEscape(r.PathValue("name"))+"/trigger", in, &out); err != nil {
		h.fail(w, r, s, err)
		return
	}
	if len(out.Runs) == 1 {
		http.Redirect(w, r, "/runs/"+pathEscape(out.Runs[0].ID), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/runs?source="+url.QueryEscape(r.PathValue("name")), http.StatusSeeOther)
}

func (h *Handler) audit(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	q := url.Values{"limit": {"200"}}
	for _, k := range []string{"actor", "action", "outcome"} {
		if v := r.URL.Query().Get(k); v != "" {
			q.Set(k, v)
		}
	}
	var list apiv1.AuditList
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/audit?"+q.Encode(), nil, &list); err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "audit", s, map[string]any{"Entries": list.Entries, "Query": q})
}

func (h *Handler) secrets(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	var list apiv1.SecretList
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/secrets", nil, &list); err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "secrets", s, map[string]any{"Secrets": list.Secrets})
}
