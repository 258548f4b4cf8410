package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/store"
)

// maxAuditPage bounds limit= of GET /api/v1/audit.
const maxAuditPage = 1000

// listAudit serves GET /api/v1/audit?actor=&action=&outcome=&since=&before=&limit=.
// since is RFC 3339 or a duration back from now ("24h"); action may end
// in "." to select a prefix ("secret.").
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.AuditFilter{ActorID: q.Get("actor"), Action: q.Get("action"), Outcome: q.Get("outcome"), Before: q.Get("before"), Limit: 100}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditPage {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to %d", v, maxAuditPage))
			return
		}
		f.Limit = n
	}
	if v := q.Get("since"); v != "" {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			f.Since = t
		} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
			f.Since = s.cfg.Now().Add(-d)
		} else {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("since %q: want an RFC 3339 time or a duration such as 24h", v))
			return
		}
	}
	switch f.Outcome {
	case "", "allowed", "denied", "failed":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("outcome %q: want allowed, denied or failed", f.Outcome))
		return
	}
	// Entries recorded before this request are listed: write the queue.
	s.cfg.Audit.Flush(r.Context())
	rows, err := s.db.ListAudit(r.Context(), f)
	if err != nil {
		s.storeError(w, "list audit log", err)
		return
	}
	out := apiv1.AuditList{Entries: []apiv1.AuditEntry{}}
	for _, e := range rows {
		out.Entries = append(out.Entries, apiv1.AuditEntry{ID: e.ID, Time: e.CreatedAt, ActorType: e.ActorType, ActorID: e.ActorID,
			ActorName: e.ActorName, Role: e.Role, Action: e.Action, Target: e.Target, Outcome: e.Outcome, Status: e.Status,
			Detail: e.Detail, ClientAddr: e.ClientAddr})
	}
	if len(rows) == f.Limit {
		out.Next = rows[len(rows)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}
