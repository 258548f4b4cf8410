package api

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/dispatch"
	"github.com/kici-dev/kici/internal/store"
)

// Paging of GET /api/v1/queue.
const (
	defaultQueueLimit = 100
	maxQueueLimit     = 1000
	// maxCursorLen bounds a cursor: one of ours is under 100 characters.
	maxCursorLen = 200
)

// errBadCursor is the reason of every cursor this server did not hand out.
var errBadCursor = errors.New("not a next_cursor of this listing (start without a cursor)")

// queue lists the queue oldest first, a page of ?limit= rows (default 100,
// at most 1000) after ?cursor= (the next_cursor of the page before).
func (s *Server) queue(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultQueueLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxQueueLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to %d", v, maxQueueLimit))
			return
		}
		limit = n
	}
	var after *store.QueueCursor
	if v := q.Get("cursor"); v != "" {
		c, err := decodeQueueCursor(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("cursor %q: %v", clip(v, 64), err))
			return
		}
		after = &c
	}
	// One row more than the page says whether another page follows.
	rows, err := s.db.ListQueuePage(r.Context(), after, limit+1)
	if err != nil {
		s.storeError(w, "list queue", err)
		return
	}
	out := apiv1.Queue{Jobs: make([]apiv1.QueueEntry, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		out.NextCursor = encodeQueueCursor(store.QueueCursor{EnqueuedAt: last.EnqueuedAt, JobID: last.JobID})
	}
	view := newQueueView(s.disp.Agents(), s.disp.ScaleStatusOf)
	if view.held, err = s.db.ConcurrencyWaits(r.Context(), pendingJobs(rows)); err != nil {
		s.storeError(w, "list queue", err)
		return
	}
	for _, e := range rows {
		out.Jobs = append(out.Jobs, apiv1.QueueEntry{
			JobID: e.JobID, RunID: e.RunID, Job: e.JobName, Labels: e.Labels, Status: queueStatus(e.Status),
			AgentID: e.AgentID, Attempts: e.DispatchAttempts, Enqueued: e.EnqueuedAt,
			WhyPending: view.why(e.QueueEntry),
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// queueStatus names a queue row's state with the job statuses of the
// contract: a pending row is a queued job.
func queueStatus(st store.QueueStatus) string {
	if st == store.QueuePending {
		return "queued"
	}
	return string(st)
}

// encodeQueueCursor makes the opaque next_cursor of a page: the enqueue
// time (microseconds, the store's precision) and job id of its last row.
func encodeQueueCursor(c store.QueueCursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d/%s", c.EnqueuedAt.UnixMicro(), c.JobID))
}

// decodeQueueCursor reads a cursor made by encodeQueueCursor.
func decodeQueueCursor(v string) (store.QueueCursor, error) {
	if len(v) > maxCursorLen {
		return store.QueueCursor{}, errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return store.QueueCursor{}, errBadCursor
	}
	micros, jobID, ok := strings.Cut(string(raw), "/")
	n, err := strconv.ParseInt(micros, 10, 64)
	if !ok || err != nil || n < 0 || jobID == "" || strings.ContainsFunc(jobID, func(r rune) bool { return r < ' ' || r > '~' }) {
		return store.QueueCursor{}, errBadCursor
	}
	return store.QueueCursor{EnqueuedAt: time.UnixMicro(n).UTC(), JobID: jobID}, nil
}

// clip shortens a value echoed in an error.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// agentSnapshot is what why-pending needs of one connected agent, read
// once per listing.
type agentSnapshot struct {
	id       string
	labels   []string
	draining bool
	full     bool
}

// queueView words why queue rows wait, from one snapshot of the agents
// and the scaler's answers. What it says of the agents depends only on a
// row's labels, so it is worked out once per label set: a page of 1000
// rows costs one pass over the agents per distinct label set, not per row.
type queueView struct {
	agents []agentSnapshot
	scale  func(jobID string) (dispatch.ScaleStatus, bool)
	// byLabels caches agentsWhy per label set.
	byLabels map[string]agentsWhy
	// held says why, for the queued jobs that their concurrency group or
	// matrix max-parallel holds back (store.ConcurrencyWaits).
	held map[string]string
}

// pendingJobs are the ids of the queued (not dispatched) rows.
func pendingJobs(rows []store.QueueListEntry) []string {
	var ids []string
	for _, e := range rows {
		if e.Status == store.QueuePending {
			ids = append(ids, e.JobID)
		}
	}
	return ids
}

// agentsWhy is what the connected agents say about one label set.
type agentsWhy struct {
	why     string
	drained []string
}

func newQueueView(agents []*dispatch.Agent, scale func(string) (dispatch.ScaleStatus, bool)) *queueView {
	v := &queueView{scale: scale, byLabels: map[string]agentsWhy{}}
	for _, a := range agents {
		v.agents = append(v.agents, agentSnapshot{id: a.ID, labels: a.Labels, draining: a.Draining(), full: len(a.BusyJobs()) >= a.Capacity})
	}
	return v
}

// why says in words why a queue row waits: its dispatch state, its
// concurrency group or matrix max-parallel when they hold it back, or
// what the connected agents (the drained ones named) and, when the job was
// offered to it, the scaler say; then the job's provisioning error and
// last requeue reason.
func (v *queueView) why(e store.QueueEntry) string {
	if held, ok := v.held[e.JobID]; ok && e.Status == store.QueuePending {
		return held
	}
	switch {
	case e.RecoveryDeadline != nil:
		return fmt.Sprintf("waiting for agent %s to reconnect and reclaim the job until %s", e.RecoveryAgentID, e.RecoveryDeadline.UTC().Format(time.RFC3339))
	case e.Status == store.QueueDispatched && e.AckDeadline != nil:
		return fmt.Sprintf("dispatched to agent %s, waiting for it to acknowledge (deadline %s)", e.AgentID, e.AckDeadline.UTC().Format(time.RFC3339))
	case e.Status == store.QueueDispatched:
		return fmt.Sprintf("running on agent %s", e.AgentID)
	}
	aw := v.agentsFor(e.Labels)
	why := aw.why
	if st, ok := v.scale(e.JobID); ok && e.Status == store.QueuePending {
		why = st.Why()
		if len(aw.drained) > 0 {
			why += fmt.Sprintf("; drained: %s (kici-admin agents undrain ID)", strings.Join(aw.drained, ", "))
		}
	}
	if pe := e.LastProvisioningError; pe != "" && !strings.Contains(why, pe) && !strings.Contains(why, strconv.Quote(pe)) {
		why += "; last provisioning error: " + pe
	}
	switch {
	case e.LastRequeueReason != "" && e.DispatchAttempts == 0:
		why += "; " + e.LastRequeueReason // a new attempt's row (a retry) says why it is there
	case e.LastRequeueReason != "":
		why += fmt.Sprintf("; requeued %d time(s), last because %s", e.DispatchAttempts, e.LastRequeueReason)
	}
	return why
}

// agentsFor says what the connected agents make of a label set.
func (v *queueView) agentsFor(labels []string) agentsWhy {
	key := strings.Join(labels, "\x00")
	if aw, ok := v.byLabels[key]; ok {
		return aw
	}
	fitting, busy := 0, 0
	var drained []string
	for _, a := range v.agents {
		if !covers(a.labels, labels) {
			continue
		}
		fitting++
		switch {
		case a.draining:
			drained = append(drained, a.id)
		case a.full:
			busy++
		}
	}
	var why string
	switch {
	case fitting == 0:
		why = fmt.Sprintf("no connected agent has all of the labels %v", labels)
	case len(drained) == fitting:
		why = fmt.Sprintf("waiting for a free agent: every agent with labels %v is drained (%s; kici-admin agents undrain ID)", labels, strings.Join(drained, ", "))
	case busy+len(drained) == fitting:
		why = fmt.Sprintf("waiting for a free agent: all %d agents with labels %v are busy", fitting, labels)
		if len(drained) > 0 {
			why = fmt.Sprintf("waiting for a free agent: of the %d agents with labels %v, %d are busy and %d drained (%s)",
				fitting, labels, busy, len(drained), strings.Join(drained, ", "))
		}
	default:
		why = "about to be dispatched"
	}
	aw := agentsWhy{why: why, drained: drained}
	v.byLabels[key] = aw
	return aw
}

func covers(have, need []string) bool {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}
