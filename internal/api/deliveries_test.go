package api_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
)

// brokenWorkflow is a workflow file with a key no workflow has.
const brokenWorkflow = `name: broken
on:
  push: {branches: [main]}
jobs:
  x:
    runs-on: [linux]
    no-such-key: 1
    steps:
      - run: echo hi
`

// problemLine is one line of an invalid workflow's error.
var problemLine = regexp.MustCompile(`^\.kici/workflows/broken\.yml:\d+:\d+: \S.*$`)

// deliveries lists a source's deliveries with the query q ("" for none).
func (h *harness) deliveries(t *testing.T, source, q string) apiv1.DeliveryList {
	t.Helper()
	var out apiv1.DeliveryList
	h.mustAdmin(t, http.MethodGet, "/api/v1/sources/"+source+"/deliveries"+q, nil, http.StatusOK, &out)
	return out
}

// refIDs are the ids of runs.
func refIDs(runs []apiv1.RunRef) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// checkProblems fails unless lines are FILE:LINE:COL: message lines of
// the broken workflow, at least one.
func checkProblems(t *testing.T, what string, lines []string) {
	t.Helper()
	if len(lines) == 0 {
		t.Errorf("%s: got no problems, want the broken workflow's", what)
	}
	for _, l := range lines {
		if !problemLine.MatchString(l) {
			t.Errorf("%s: problem %q, want .kici/workflows/broken.yml:LINE:COL: message", what, l)
		}
	}
}

func TestDeliveriesListVerdicts(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "app", dir, webhookSecret)
		mixedDir, mixedSHA := gitRepo(t, map[string]string{".kici/workflows/ci.yml": ciWorkflow, ".kici/workflows/broken.yml": brokenWorkflow})
		h.addSource(t, "mixed", mixedDir, webhookSecret)

		// accepted: a signed push that starts the ci run.
		push := githubPush(t, sha)
		resp := h.deliver(t, delivery{route: "github", source: "app", event: "push", id: "d-ok", signature: sign(webhookSecret, push), body: push})
		if resp.status != http.StatusOK {
			t.Fatalf("accepted delivery: got %d %s, want 200", resp.status, resp.body)
		}
		var accepted apiv1.TriggerResponse
		resp.decode(t, &accepted)
		if len(accepted.Runs) != 1 {
			t.Fatalf("accepted delivery: got runs %v, want 1", accepted.Runs)
		}
		// rejected_signature: the same body signed with another secret.
		resp = h.deliver(t, delivery{route: "github", source: "app", event: "push", id: "d-bad", signature: sign("wrong", push), body: push})
		if resp.status != http.StatusUnauthorized {
			t.Fatalf("bad signature: got %d, want 401", resp.status)
		}
		// invalid_workflow: the commit's ci.yml runs, broken.yml does not.
		mixedPush := genericPush(mixedSHA)
		resp = h.deliver(t, delivery{route: "generic", source: "mixed", id: "d-mixed", signature: sign(webhookSecret, mixedPush), body: mixedPush})
		if resp.status != http.StatusOK {
			t.Fatalf("invalid-workflow delivery: got %d %s, want 200 with the valid workflow's run", resp.status, resp.body)
		}
		var mixed apiv1.TriggerResponse
		resp.decode(t, &mixed)
		if len(mixed.Runs) != 1 || mixed.Runs[0].Workflow != "ci" {
			t.Fatalf("invalid-workflow delivery: got runs %+v, want one run of ci", mixed.Runs)
		}
		checkProblems(t, "invalid-workflow answer", mixed.Problems)
		if run := h.getRun(t, mixed.Runs[0].ID); run.Workflow != "ci" || run.SHA != mixedSHA {
			t.Errorf("valid workflow's run: got workflow %q at %s, want ci at %s", run.Workflow, run.SHA, mixedSHA)
		}

		type row struct {
			DeliveryID, Event, Verdict string
			Runs                       []string
			HasError, Redeliverable    bool
		}
		rows := func(l apiv1.DeliveryList) []row {
			var out []row
			for _, d := range l.Deliveries {
				out = append(out, row{d.DeliveryID, d.Event, d.Verdict, d.Runs, d.Error != "", d.Redeliverable})
			}
			return out
		}
		app := h.deliveries(t, "app", "")
		want := []row{
			{"d-bad", "push", "rejected_signature", []string{}, true, false},
			{"d-ok", "push", "accepted", refIDs(accepted.Runs), false, true},
		}
		if diff := cmp.Diff(want, rows(app)); diff != "" {
			t.Errorf("deliveries of app, newest first (-want +got):\n%s", diff)
		}
		for _, d := range app.Deliveries {
			if d.ID == "" || d.ReceivedAt.IsZero() {
				t.Errorf("delivery %+v: want an id and a receipt time", d)
			}
		}
		if len(app.Deliveries) == 2 && !app.Deliveries[0].ReceivedAt.After(app.Deliveries[1].ReceivedAt) {
			t.Errorf("received_at: got %v then %v, want newest first", app.Deliveries[0].ReceivedAt, app.Deliveries[1].ReceivedAt)
		}
		got := h.deliveries(t, "mixed", "")
		if diff := cmp.Diff([]row{{"d-mixed", "push", "invalid_workflow", refIDs(mixed.Runs), true, true}}, rows(got)); diff != "" {
			t.Fatalf("deliveries of mixed (-want +got):\n%s", diff)
		}
		checkProblems(t, "invalid-workflow delivery's error", strings.Split(got.Deliveries[0].Error, "\n"))

		// The trigger API runs the valid workflow and names the problems.
		var trig apiv1.TriggerResponse
		h.mustAdmin(t, http.MethodPost, "/api/v1/sources/mixed/trigger", apiv1.TriggerRequest{Event: "push", Ref: "main"}, http.StatusOK, &trig)
		if len(trig.Runs) != 1 || trig.Runs[0].Workflow != "ci" {
			t.Errorf("trigger of mixed: got runs %+v, want one run of ci", trig.Runs)
		}
		checkProblems(t, "trigger answer", trig.Problems)

		resp = h.admin(t, http.MethodGet, "/api/v1/sources/nope/deliveries", nil)
		if resp.status != http.StatusNotFound {
			t.Errorf("deliveries of an unknown source: got %d, want 404", resp.status)
		}
	})
}

func TestDeliveriesPagination(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "app", dir, webhookSecret)
		body := genericPush(sha)
		const n = 5
		for i := range n {
			// Rejected deliveries: fast, and under the sampler's 10 a minute.
			resp := h.deliver(t, delivery{route: "generic", source: "app", id: fmt.Sprintf("d-%d", i), signature: sign("wrong", body), body: body})
			if resp.status != http.StatusUnauthorized {
				t.Fatalf("delivery %d: got %d, want 401", i, resp.status)
			}
		}
		all := h.deliveries(t, "app", "")
		if len(all.Deliveries) != n || all.NextCursor != "" {
			t.Fatalf("whole list: got %d deliveries and next_cursor %q, want %d and none", len(all.Deliveries), all.NextCursor, n)
		}
		var paged []string
		var pages []int
		cursor := ""
		for range n + 1 {
			q := "?limit=2"
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			page := h.deliveries(t, "app", q)
			pages = append(pages, len(page.Deliveries))
			for _, d := range page.Deliveries {
				paged = append(paged, d.DeliveryID)
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		var want []string
		for _, d := range all.Deliveries {
			want = append(want, d.DeliveryID)
		}
		if diff := cmp.Diff(want, paged); diff != "" {
			t.Errorf("pages of 2 (-whole list +pages):\n%s", diff)
		}
		if diff := cmp.Diff([]int{2, 2, 1}, pages); diff != "" {
			t.Errorf("page sizes (-want +got):\n%s", diff)
		}
		if want[0] != "d-4" || want[n-1] != "d-0" {
			t.Errorf("order: got %v, want newest (d-4) first", want)
		}
		for _, q := range []string{"?cursor=bogus", "?cursor=" + strings.Repeat("A", 300), "?limit=0", "?limit=1001", "?limit=x"} {
			resp := h.admin(t, http.MethodGet, "/api/v1/sources/app/deliveries"+q, nil)
			if resp.status != http.StatusBadRequest {
				t.Errorf("%s: got %d, want 400", q, resp.status)
			}
		}
	})
}

func TestDeliveriesRedeliver(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "app", dir, webhookSecret)
		push := githubPush(t, sha)
		resp := h.deliver(t, delivery{route: "github", source: "app", event: "push", id: "d-1", signature: sign(webhookSecret, push), body: push})
		if resp.status != http.StatusOK {
			t.Fatalf("delivery: got %d %s, want 200", resp.status, resp.body)
		}
		var first apiv1.TriggerResponse
		resp.decode(t, &first)
		resp = h.deliver(t, delivery{route: "github", source: "app", event: "push", id: "d-2", signature: sign("wrong", push), body: push})
		if resp.status != http.StatusUnauthorized {
			t.Fatalf("bad signature: got %d, want 401", resp.status)
		}
		list := h.deliveries(t, "app", "")
		if len(list.Deliveries) != 2 {
			t.Fatalf("got %d deliveries, want 2", len(list.Deliveries))
		}
		rejected, accepted := list.Deliveries[0], list.Deliveries[1]

		var re apiv1.Redelivery
		h.mustAdmin(t, http.MethodPost, "/api/v1/sources/app/deliveries/"+accepted.ID+"/redeliver", nil, http.StatusOK, &re)
		if len(re.Runs) != 1 || re.Runs[0].ID == first.Runs[0].ID {
			t.Fatalf("redelivery: got runs %+v, want one new run (not %s)", re.Runs, first.Runs[0].ID)
		}
		wantNew := apiv1.Delivery{ID: re.Delivery.ID, DeliveryID: "d-1", Event: "push", Verdict: "accepted", Runs: refIDs(re.Runs), RedeliveryOf: accepted.ID, Redeliverable: true}
		gotNew := re.Delivery
		gotNew.ReceivedAt, gotNew.Detail, gotNew.ClientAddr, gotNew.UserAgent, gotNew.BodyBytes = wantNew.ReceivedAt, "", "", "", 0
		if diff := cmp.Diff(wantNew, gotNew); diff != "" {
			t.Errorf("redelivery's record (-want +got):\n%s", diff)
		}
		if re.Delivery.ID == accepted.ID {
			t.Errorf("redelivery: got the original's id %s, want a new delivery", accepted.ID)
		}
		list = h.deliveries(t, "app", "")
		if len(list.Deliveries) != 3 || list.Deliveries[0].ID != re.Delivery.ID {
			t.Errorf("after the redelivery: got %+v, want it listed first of 3", list.Deliveries)
		}
		// The provider's own redelivery of d-1 is still a duplicate.
		resp = h.deliver(t, delivery{route: "github", source: "app", event: "push", id: "d-1", signature: sign(webhookSecret, push), body: push})
		var dup struct{ Duplicate bool }
		if resp.decode(t, &dup); resp.status != http.StatusOK || !dup.Duplicate {
			t.Errorf("provider redelivery of d-1: got %d %s, want 200 duplicate", resp.status, resp.body)
		}

		resp = h.admin(t, http.MethodPost, "/api/v1/sources/app/deliveries/"+rejected.ID+"/redeliver", nil)
		if resp.status != http.StatusConflict || !strings.Contains(resp.apiError(t).Error, "rejected_signature") {
			t.Errorf("redeliver a rejected delivery: got %d %s, want 409 naming rejected_signature", resp.status, resp.body)
		}
		resp = h.admin(t, http.MethodPost, "/api/v1/sources/app/deliveries/no-such-id/redeliver", nil)
		if resp.status != http.StatusNotFound {
			t.Errorf("redeliver an unknown delivery: got %d, want 404", resp.status)
		}
	})
}
