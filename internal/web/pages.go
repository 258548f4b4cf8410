package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/scaler"
)

// maxPageLines bounds the log lines a run page embeds per job; the rest
// is read through the API (or the raw download). The live part appends
// to it.
const maxPageLines = 5000

func (h *Handler) runs(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	q := url.Values{}
	filters := map[string]string{}
	for _, k := range []string{"status", "source", "workflow", "branch"} {
		if v := r.URL.Query().Get(k); v != "" {
			q.Set(k, v)
			filters[k] = v
		}
	}
	q.Set("limit", "100")
	var list apiv1.RunList
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/runs?"+q.Encode(), nil, &list); err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "runs", s, map[string]any{"Runs": list.Runs, "Filter": filters,
		"Statuses": []string{apiv1.RunAwaitingApproval, apiv1.RunPending, apiv1.RunRunning, apiv1.RunSuccess, apiv1.RunFailure, apiv1.RunCancelled}})
}

// jobView is a job with its log lines grouped by step.
type jobView struct {
	apiv1.Job
	Sections  []section
	Truncated bool
	// Idx is the job's index in the run, Total its lines on the page,
	// Pos where those lines end in the event stream's terms ("" when
	// truncated: the script asks the outline).
	Idx   int
	Total int
	Pos   string
	// Artifact is what the job uploaded, if anything.
	Artifact *apiv1.Artifact
}

// section is one step's (or the provisioning's) lines.
type section struct {
	Step   int
	Title  string
	Status string
	Lines  []lineView
	Failed bool
	// From is the number its first line has (or would have).
	From int
}

// lineView is a line as the page shows it: its number in the job's log
// (for #L links) and its text converted to safe HTML.
type lineView struct {
	N    int
	TS   time.Time
	HTML any
}

func (h *Handler) run(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	id := r.PathValue("id")
	var run apiv1.Run
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/runs/"+pathEscape(id), nil, &run); err != nil {
		h.fail(w, r, s, err)
		return
	}
	// The top of the page goes out at once; the jobs' logs are read
	// meanwhile, a few at a time (a run of many jobs reads as many logs).
	held := slices.ContainsFunc(run.Jobs, func(j apiv1.Job) bool { return j.Status == apiv1.JobAwaitingApproval })
	h.stream(w, r, "run", s, map[string]any{"Run": run, "Ended": ended(run.Status), "Held": held}, func() (map[string]any, error) {
		jobs := make([]jobView, len(run.Jobs))
		errs := make([]error, len(run.Jobs))
		sem := make(chan struct{}, 4)
		var wg sync.WaitGroup
		for i, j := range run.Jobs {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				lines, truncated, next, err := h.jobLines(r, s, run.ID, j.Name)
				jobs[i], errs[i] = jobView{Job: j, Truncated: truncated, Sections: sections(j, lines), Idx: i, Total: len(lines)}, err
				if !truncated {
					jobs[i].Pos = streamPos(next)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		// The jobs' artifacts, when the orchestrator keeps any: a page
		// without them is still a page.
		var arts apiv1.ArtifactList
		if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/runs/"+pathEscape(run.ID)+"/artifacts", nil, &arts); err != nil {
			h.cfg.Log.Debug("dashboard: no artifacts for the run page", "run_id", run.ID, "error", err)
		}
		for i := range arts.Artifacts {
			for k := range jobs {
				if jobs[k].Name == arts.Artifacts[i].Job {
					jobs[k].Artifact = &arts.Artifacts[i]
				}
			}
		}
		return map[string]any{"Jobs": jobs, "Graph": jobGraph(run.Jobs)}, nil
	})
}

func ended(status string) bool {
	switch status {
	case apiv1.RunSuccess, apiv1.RunFailure, apiv1.RunCancelled:
		return true
	}
	return false
}

// jobLines reads a job's stored lines, up to maxPageLines, and the
// cursor after them.
func (h *Handler) jobLines(r *http.Request, s *sessionInfo, runID, job string) ([]apiv1.LogLine, bool, string, error) {
	var out []apiv1.LogLine
	cursor := ""
	for range 1000 {
		var page apiv1.LogPage
		path := fmt.Sprintf("/api/v1/runs/%s/jobs/%s/logs?cursor=%s", pathEscape(runID), pathEscape(job), url.QueryEscape(cursor))
		if err := h.call(r.Context(), s.Principal, http.MethodGet, path, nil, &page); err != nil {
			return nil, false, "", err
		}
		out = append(out, page.Lines...)
		if len(out) >= maxPageLines {
			return out[:maxPageLines], true, "", nil
		}
		if page.Done || len(page.Lines) == 0 || page.Next == cursor {
			return out, false, page.Next, nil
		}
		cursor = page.Next
	}
	return out, true, "", nil
}

// sections groups a job's lines by step, in step order, the provisioning
// section first; lines are numbered through the whole job.
func sections(j apiv1.Job, lines []apiv1.LogLine) []section {
	byStep := map[int]*section{}
	var order []int
	get := func(step int) *section {
		if sec, ok := byStep[step]; ok {
			return sec
		}
		sec := &section{Step: step, Title: fmt.Sprintf("step %d", step+1)}
		switch step {
		case apiv1.ProvisioningStep:
			sec.Title = "provisioning"
		case -1:
			sec.Title = "setup"
		}
		for _, st := range j.Steps {
			if st.Index == step {
				sec.Title, sec.Status = st.Name, st.Status
				sec.Failed = st.Status == "failure"
			}
		}
		byStep[step] = sec
		order = append(order, step)
		return sec
	}
	for _, st := range j.Steps {
		get(st.Index)
	}
	for i, l := range lines {
		sec := get(l.Step)
		sec.Lines = append(sec.Lines, lineView{N: i + 1, TS: l.TS, HTML: ansiHTML(l.Text)})
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a] < order[b] })
	out := make([]section, 0, len(order))
	next := 1
	for _, st := range order {
		sec := *byStep[st]
		sec.From = next
		if len(sec.Lines) > 0 {
			sec.From = sec.Lines[0].N
			next = sec.Lines[len(sec.Lines)-1].N + 1
		}
		out = append(out, sec)
	}
	return out
}

// cancel asks the API to cancel the run, then shows the run.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	id := r.PathValue("id")
	if err := h.call(r.Context(), s.Principal, http.MethodPost, "/api/v1/runs/"+pathEscape(id)+"/cancel", nil, nil); err != nil {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/runs/"+pathEscape(id), http.StatusSeeOther)
}

// artifacts downloads a job's artifacts (the tar.gz bundle, its digest in
// a header): the API's route, served for the session.
func (h *Handler) artifacts(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	req := r.Clone(r.Context())
	req.URL.Path = "/api/v1/runs/" + pathEscape(r.PathValue("id")) + "/artifacts/" + pathEscape(r.PathValue("job"))
	req.URL.RawPath = ""
	req.URL.RawQuery = ""
	req.RequestURI = ""
	h.cfg.API.ServeAs(s.Principal, w, req)
}

// events streams the run's live events to the page's script: the API's
// own stream, served for the session.
func (h *Handler) events(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	req := r.Clone(r.Context())
	req.URL.Path = "/api/v1/runs/" + pathEscape(r.PathValue("id")) + "/events"
	req.URL.RawPath = ""
	req.RequestURI = ""
	w.Header().Set("X-Accel-Buffering", "no")
	h.cfg.API.ServeAs(s.Principal, w, req)
}

func (h *Handler) queue(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	var q apiv1.Queue
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/queue?limit=500", nil, &q); err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "queue", s, map[string]any{"Jobs": q.Jobs})
}

func (h *Handler) agents(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	var list apiv1.AgentList
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/agents", nil, &list); err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "agents", s, map[string]any{"Agents": list.Agents})
}

// scalerList is GET /api/v1/scalers.
type scalerList struct {
	Configured bool                  `json:"configured"`
	Scalers    []scaler.ScalerStatus `json:"scalers"`
}

func (h *Handler) scalers(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	var list scalerList
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/scalers", nil, &list); err != nil {
		h.fail(w, r, s, err)
		return
	}
	data := map[string]any{"Configured": list.Configured, "Scalers": list.Scalers}
	if list.Configured {
		var ol struct {
			Compute []scaler.Orphan `json:"compute"`
			Error   string          `json:"error"`
		}
		if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/scalers/orphans", nil, &ol); err != nil {
			data["OrphansError"] = err.Error()
		}
		data["Compute"], data["ComputeError"] = ol.Compute, ol.Error
	}
	h.render(w, r, http.StatusOK, "scalers", s, data)
}

func (h *Handler) sources(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	var list apiv1.SourceList
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/sources", nil, &list); err != nil {
		h.fail(w, r, s, err)
		return
	}
	type sourceView struct {
		apiv1.Source
		Webhook    string
		Deliveries []apiv1.Delivery
		Error      string
	}
	var views []sourceView
	base := strings.TrimRight(h.cfg.PublicURL, "/")
	for _, src := range list.Sources {
		v := sourceView{Source: src, Webhook: base + "/webhooks/generic/" + pathEscape(src.Name)}
		if src.Kind == "github" {
			v.Webhook = base + "/webhooks/github/" + pathEscape(src.Name)
		}
		if s.Can("event_log.read") {
			var dl apiv1.DeliveryList
			if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/sources/"+pathEscape(src.Name)+"/deliveries?limit=10", nil, &dl); err != nil {
				v.Error = err.Error()
			}
			v.Deliveries = dl.Deliveries
		}
		views = append(views, v)
	}
	h.render(w, r, http.StatusOK, "sources", s, map[string]any{"Sources": views})
}

func (h *Handler) peers(w http.ResponseWriter, r *http.Request, s *sessionInfo) {
	var list apiv1.PeerList
	if err := h.call(r.Context(), s.Principal, http.MethodGet, "/api/v1/peers", nil, &list); err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "peers", s, map[string]any{"List": list})
}

// since words how long ago t was, for tables.
func since(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02")
}

// duration words a span between two times; "" while it goes on.
func duration(start, end *time.Time) string {
	if start == nil || end == nil {
		return ""
	}
	d := end.Sub(*start)
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(time.Second).String()
}

func join(s []string) string { return strings.Join(s, ", ") }
