package admincli

import (
	"net/http"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

func fakeTime(t time.Time) *time.Time { return &t }

// fakeScheduleList is what the fake orchestrator's scheduler has cached:
// schedules of hello (one never fired, one whose run was deleted) and of
// nightly, a spec that never fires again, and two sources with problems
// (one multi-line, one with a control character in a file name).
var fakeScheduleList = apiv1.ScheduleList{
	Schedules: []apiv1.Schedule{
		{Source: "hello", Workflow: "nightly", File: ".kici/workflows/nightly.yml", Cron: "0 3 * * *", SHA: "9fceb02d0ae598e95dc970b74767f19372d61af8",
			NextTick: fakeTime(time.Date(2026, 3, 15, 3, 0, 0, 0, time.UTC)),
			LastRun:  &apiv1.ScheduledRun{Tick: time.Date(2026, 3, 14, 3, 0, 0, 0, time.UTC), RunID: "r-301", Status: "success"}},
		{Source: "hello", Workflow: "poll", File: ".kici/workflows/poll.yml", Cron: "*/5 * * * *", SHA: "9fceb02d0ae598e95dc970b74767f19372d61af8",
			NextTick: fakeTime(fakeNow.Add(42 * time.Second)),
			LastRun:  &apiv1.ScheduledRun{Tick: before(5*time.Minute - 42*time.Second), RunID: "r-302"}},
		{Source: "hello", Workflow: "weekly", File: ".kici/workflows/weekly.yml", Cron: "0 6 * * 1", SHA: "9fceb02d0ae598e95dc970b74767f19372d61af8",
			NextTick: fakeTime(time.Date(2026, 3, 16, 6, 0, 0, 0, time.UTC))},
		{Source: "ops", Workflow: "leap", File: ".kici/workflows/leap.yml", Cron: "0 0 30 2 *", SHA: "1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c"},
	},
	Problems: []apiv1.ScheduleProblem{
		{Source: "ops", Error: ".kici/workflows/bad.yml:3:1: unknown key \"oops\"\n.kici/workflows/bad.yml:9:7: step 1 has neither run nor uses", At: before(2 * time.Minute)},
		{Source: "mirror", Error: "default branch: ref \"main\" not found in \x1b]0;evil\x07", At: before(2 * time.Minute)},
	},
	RefreshedAt: before(2 * time.Minute),
}

func (f *fakeAPI) schedulesRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/schedules", f.listSchedules)
}

// listSchedules serves fakeScheduleList, filtered by ?source= as the
// orchestrator filters it. Source "down" stands for an orchestrator
// without a scheduler. An empty fake has read nothing yet.
func (f *fakeAPI) listSchedules(w http.ResponseWriter, r *http.Request) {
	source := r.URL.Query().Get("source")
	if source == "down" {
		writeError(w, http.StatusServiceUnavailable, "schedules are not available on this orchestrator")
		return
	}
	if f.empty {
		writeJSONStatus(w, http.StatusOK, apiv1.ScheduleList{Schedules: []apiv1.Schedule{}})
		return
	}
	if source == "" {
		writeJSONStatus(w, http.StatusOK, fakeScheduleList)
		return
	}
	out := apiv1.ScheduleList{Schedules: []apiv1.Schedule{}, RefreshedAt: fakeScheduleList.RefreshedAt}
	for _, s := range fakeScheduleList.Schedules {
		if s.Source == source {
			out.Schedules = append(out.Schedules, s)
		}
	}
	for _, p := range fakeScheduleList.Problems {
		if p.Source == source {
			out.Problems = append(out.Problems, p)
		}
	}
	writeJSONStatus(w, http.StatusOK, out)
}
