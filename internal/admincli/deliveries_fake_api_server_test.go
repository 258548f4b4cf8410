package admincli

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// fakeDeliveries are the deliveries of source hello, newest first: an
// accepted one, a rejected one and one of a commit with an invalid
// workflow whose valid workflow ran.
var fakeDeliveries = []apiv1.Delivery{
	{
		ID: "ev-3", DeliveryID: "gh-3", Event: "push", ReceivedAt: before(2 * time.Minute), Verdict: "invalid_workflow",
		Detail: "1 run(s); some workflows at 9fceb02d0ae5 are invalid and did not run",
		Error:  ".kici/workflows/deploy.yml:7:5: unknown key \"no-such-key\"\n.kici/workflows/deploy.yml:9:7: step 1 has neither run nor uses",
		Runs:   []string{"r-103"}, BodyBytes: 7310, Redeliverable: true,
	},
	{
		ID: "ev-2", DeliveryID: "gh-2", Event: "push", ReceivedAt: before(time.Hour), Verdict: "rejected_signature",
		Detail: "X-Hub-Signature-256 does not match", Error: "X-Hub-Signature-256 does not match",
		Runs: []string{}, ClientAddr: "203.0.113.7", BodyBytes: 7310,
	},
	{
		ID: "ev-1", DeliveryID: "gh-1", Event: "push", ReceivedAt: before(3 * time.Hour), Verdict: "accepted",
		Detail: "1 run(s)", Runs: []string{"r-101"}, BodyBytes: 7310, Redeliverable: true,
	},
}

func (f *fakeAPI) deliveriesRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/sources/{name}/deliveries", f.listDeliveries)
	mux.HandleFunc("POST /api/v1/sources/{name}/deliveries/{id}/redeliver", f.redeliver)
}

// listDeliveries serves the deliveries of hello, paged as the orchestrator
// pages them: the cursor is the index of the next one.
func (f *fakeAPI) listDeliveries(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("name") != "hello" {
		writeError(w, http.StatusNotFound, fmt.Sprintf("source %q: not found", r.PathValue("name")))
		return
	}
	all := fakeDeliveries
	if f.empty {
		all = nil
	}
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit < 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want 1 to 1000", r.URL.Query().Get("limit")))
		return
	}
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		if start, err = strconv.Atoi(c); err != nil || start < 0 || start > len(all) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("cursor %q: not a next_cursor of this listing (start without a cursor)", c))
			return
		}
	}
	end := min(start+limit, len(all))
	dl := apiv1.DeliveryList{Deliveries: append([]apiv1.Delivery{}, all[start:end]...)}
	if end < len(all) {
		dl.NextCursor = strconv.Itoa(end)
	}
	writeJSONStatus(w, http.StatusOK, dl)
}

// redeliver runs ev-1 or ev-3 again; ev-2, rejected, kept no body.
func (f *fakeAPI) redeliver(w http.ResponseWriter, r *http.Request) {
	if f.auditor(w, r, "run.trigger") {
		return
	}
	id := r.PathValue("id")
	for _, d := range fakeDeliveries {
		if d.ID != id || r.PathValue("name") != "hello" {
			continue
		}
		if !d.Redeliverable {
			writeError(w, http.StatusConflict, fmt.Sprintf("delivery %q is %s and kept no body: only an accepted or invalid_workflow delivery can be redelivered", id, d.Verdict))
			return
		}
		re := apiv1.Redelivery{
			Delivery: apiv1.Delivery{ID: "ev-4", DeliveryID: d.DeliveryID, Event: d.Event, ReceivedAt: fakeNow, Verdict: d.Verdict,
				Detail: d.Detail, Error: d.Error, Runs: []string{"r-104"}, BodyBytes: d.BodyBytes, Redeliverable: true, RedeliveryOf: d.ID},
			TriggerResponse: apiv1.TriggerResponse{Runs: []apiv1.RunRef{{ID: "r-104", Workflow: "ci"}}},
		}
		if d.Verdict == "invalid_workflow" {
			re.Problems = []string{".kici/workflows/deploy.yml:7:5: unknown key \"no-such-key\"", ".kici/workflows/deploy.yml:9:7: step 1 has neither run nor uses"}
		}
		writeJSONStatus(w, http.StatusOK, re)
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("delivery %q of source %q: not found", id, r.PathValue("name")))
}
