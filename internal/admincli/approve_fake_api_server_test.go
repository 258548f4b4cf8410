package admincli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// r-450 is a run of a pull request from a fork, awaiting approval.
func init() {
	fakeRuns["r-450"] = apiv1.Run{
		ID: "r-450", Source: "app", Workflow: "ci", Ref: "refs/pull/7/head",
		Event: json.RawMessage(`{"kind":"pull_request","provider":"github","ref":"refs/pull/7/head","number":7,"fork":true,"head_repo":"mallory/app","fork_policy":"approve"}`),
		SHA:   "7777777777777777777777777777777777777777", Status: runAwaitingApproval,
		Error:     "awaiting approval: pull request #7 from fork mallory/app; nothing runs until an owner or admin approves it (kici-admin runs approve r-450), which starts it with the source's secrets",
		CreatedAt: before(time.Minute),
		Jobs: []apiv1.Job{
			{ID: "j-40", Name: "build", Status: "waiting", RunsOn: []string{"linux"}, Attempt: 1, Steps: []apiv1.Step{{Index: 1, Name: "compile", Status: "pending"}}},
		},
	}
}

func (f *fakeAPI) approveRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/runs/{id}/approve", f.approveRun)
}

// approveRun starts r-450 as the orchestrator does: 403 for the auditor,
// 409 for a run that is not awaiting approval.
func (f *fakeAPI) approveRun(w http.ResponseWriter, r *http.Request) {
	if f.auditor(w, r, "run.approve") {
		return
	}
	run, ok := f.run(w, r)
	if !ok {
		return
	}
	if run.Status != runAwaitingApproval {
		writeError(w, http.StatusConflict, fmt.Sprintf("run %q is %s, not awaiting_approval: only a run awaiting approval can be approved", run.ID, run.Status))
		return
	}
	run.Status, run.Error = runPending, ""
	run.Jobs = append([]apiv1.Job(nil), run.Jobs...)
	run.Jobs[0].Status = "queued"
	writeJSONStatus(w, http.StatusOK, run)
}
