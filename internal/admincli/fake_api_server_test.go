package admincli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// fakeToken is the token the fake API accepts, with the owner role.
const fakeToken = "test-token"

// fakeAuditorToken is accepted too, with the read-only auditor role: the
// routes that check roles (the agents' drains) refuse it with 403, as the
// orchestrator does.
const fakeAuditorToken = "auditor-token"

// fakeNow is the clock of every test: the fake's times are relative to it.
var fakeNow = time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)

func before(d time.Duration) time.Time   { return fakeNow.Add(-d) }
func beforeP(d time.Duration) *time.Time { t := before(d); return &t }
func intP(i int) *int                    { return &i }

// fakeRequest is one request the fake API received.
type fakeRequest struct {
	Method string
	// Path is the escaped path, as sent.
	Path  string
	Query string
	// Body is the JSON body decoded into any; nil when there was none.
	Body any
}

// fakeAPI is an orchestrator API on 127.0.0.1 that serves canned apiv1
// values, checks the Bearer token, decodes request bodies strictly into
// the apiv1 types, and records what it received.
type fakeAPI struct {
	t     *testing.T
	srv   *httptest.Server
	empty bool // every listing is empty

	mu       sync.Mutex
	requests []fakeRequest
	calls    map[string]int // by "what" for endpoints whose answer changes over time
}

func newFakeAPI(t *testing.T, empty bool) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, empty: empty, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/sources", f.listSources)
	mux.HandleFunc("POST /api/v1/sources", f.createSource)
	mux.HandleFunc("DELETE /api/v1/sources/{name}", f.deleteSource)
	mux.HandleFunc("POST /api/v1/sources/{name}/trigger", f.trigger)
	mux.HandleFunc("GET /api/v1/runs", f.listRuns)
	mux.HandleFunc("GET /api/v1/runs/{id}", f.getRun)
	mux.HandleFunc("POST /api/v1/runs/{id}/cancel", f.cancelRun)
	mux.HandleFunc("POST /api/v1/runs/{id}/rerun", f.rerun)
	mux.HandleFunc("GET /api/v1/runs/{id}/jobs/{job}/logs", f.logs)
	mux.HandleFunc("GET /api/v1/runs/{id}/events", f.events)
	mux.HandleFunc("GET /api/v1/queue", f.queue)
	mux.HandleFunc("GET /api/v1/agents", f.agents)
	mux.HandleFunc("POST /api/v1/agents/{id}/drain", f.drainAgent)
	mux.HandleFunc("DELETE /api/v1/agents/{id}/drain", f.undrainAgent)
	mux.HandleFunc("POST /api/v1/agent-tokens", f.createAgentToken)
	f.scalerRoutes(mux)
	f.diagnoseRoutes(mux)
	f.accessRoutes(mux)
	f.approveRoutes(mux)
	f.deliveriesRoutes(mux)
	f.schedulesRoutes(mux)
	f.peersRoutes(mux)
	f.environmentsRoutes(mux)
	f.srv = httptest.NewServer(f.record(mux))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the fake's base URL.
func (f *fakeAPI) URL() string { return f.srv.URL }

// received is a copy of the requests so far.
func (f *fakeAPI) received() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// call counts a call of what and returns its number, from 1.
func (f *fakeAPI) call(what string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[what]++
	return f.calls[what]
}

// record logs and records each request and refuses any without a token
// it knows.
func (f *fakeAPI) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		fr := fakeRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery}
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &fr.Body); err != nil {
				fr.Body = "not JSON: " + string(raw)
			}
		}
		f.mu.Lock()
		f.requests = append(f.requests, fr)
		f.mu.Unlock()
		f.t.Logf("fake api: %s %s %s", r.Method, r.URL.RequestURI(), raw)
		if a := r.Header.Get("Authorization"); a != "Bearer "+fakeToken && a != "Bearer "+fakeAuditorToken {
			writeError(w, http.StatusUnauthorized, "missing or invalid token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string, details ...string) {
	writeJSONStatus(w, status, apiv1.Error{Error: msg, Details: details})
}

// decode reads the body strictly into v, answering 400 when it does not fit.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// The canned data.

var fakeSources = []apiv1.Source{
	{Name: "hello", Kind: "local", Path: "/srv/kici/examples/hello", ForkPullRequests: "approve", CreatedAt: before(2 * time.Hour)},
	{Name: "app", Kind: "github", Repo: "kici-dev/app", ForkPullRequests: "run", CreatedAt: before(26 * time.Hour)},
}

func pushEvent(ref string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"kind":"push","provider":"manual","ref":%q}`, ref))
}

var fakeRuns = map[string]apiv1.Run{
	"r-103": {
		ID: "r-103", Source: "hello", Workflow: "hello", Event: pushEvent("refs/heads/main"), Ref: "refs/heads/main",
		SHA: "9f1c2e7d5b4a39c8e0f6a1b2c3d4e5f60718293a", Status: runRunning,
		CreatedAt: before(30 * time.Second), StartedAt: beforeP(25 * time.Second),
		Jobs: []apiv1.Job{{
			ID: "j-10", Name: "build", Status: "running", RunsOn: []string{"linux"}, AgentID: "agent-1",
			StartedAt: beforeP(20 * time.Second), Attempt: 1, QueuedAt: beforeP(22 * time.Second),
			Steps: []apiv1.Step{
				{Index: 0, Name: "compile", Status: "running", StartedAt: beforeP(19 * time.Second)},
				{Index: 1, Name: "test", Status: "pending"},
			},
		}},
	},
	"r-102": {
		ID: "r-102", Source: "app", Workflow: "ci", Event: json.RawMessage(`{"kind":"tag","ref":"refs/tags/v1.0.0"}`),
		Ref: "refs/tags/v1.0.0", SHA: "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567", Status: runFailure,
		Error:     `job "test (shard=1)" failed`,
		CreatedAt: before(time.Hour), StartedAt: beforeP(time.Hour - 5*time.Second), FinishedAt: beforeP(time.Hour - 2*time.Minute - 10*time.Second),
		Jobs: []apiv1.Job{
			{
				ID: "j-1", Name: "lint", Status: "success", RunsOn: []string{"linux"}, AgentID: "agent-1",
				StartedAt: beforeP(time.Hour - 5*time.Second), FinishedAt: beforeP(time.Hour - 8*time.Second),
				Attempt: 1, QueuedAt: beforeP(time.Hour - 4*time.Second),
				Steps: []apiv1.Step{{Index: 0, Name: "check files", Status: "success", ExitCode: intP(0),
					StartedAt: beforeP(time.Hour - 6*time.Second), FinishedAt: beforeP(time.Hour - 8*time.Second)}},
			},
			{
				ID: "j-2", Name: "test (shard=1)", Status: "failure", RunsOn: []string{"linux", "docker"}, AgentID: "agent-2",
				Error:     `step "work": exited with code 1`,
				StartedAt: beforeP(time.Hour - 10*time.Second), FinishedAt: beforeP(time.Hour - 2*time.Minute),
				Attempt: 2, QueuedAt: beforeP(time.Hour - 9*time.Second),
				PreviousAttempts: []apiv1.JobAttempt{{
					Attempt: 1, Cause: "agent-lost", Error: "agent lost: agent agent-3 disconnected and did not come back within 2m0s",
					AgentID: "agent-3", StartedAt: beforeP(time.Hour - 5*time.Second), EndedAt: before(time.Hour - 9*time.Second),
				}},
				Steps: []apiv1.Step{
					{Index: 0, Name: "greet", Status: "success", ExitCode: intP(0),
						StartedAt: beforeP(time.Hour - 11*time.Second), FinishedAt: beforeP(time.Hour - 12*time.Second)},
					{Index: 1, Name: "work", Status: "failure", ExitCode: intP(1), Error: "exited with code 1",
						StartedAt: beforeP(time.Hour - 12*time.Second), FinishedAt: beforeP(time.Hour - 2*time.Minute)},
				},
			},
			{
				ID: "j-3", Name: "report", Status: "skipped", RunsOn: []string{}, Attempt: 1,
				Steps: []apiv1.Step{{Index: 0, Name: "summary", Status: "skipped"}},
			},
		},
	},
	"r-101": {
		ID: "r-101", Source: "hello", Workflow: "hello", Event: pushEvent("refs/heads/main"), Ref: "refs/heads/main",
		SHA: "1111111111111111111111111111111111111111", Status: runSuccess,
		CreatedAt: before(3 * time.Hour), StartedAt: beforeP(3*time.Hour - 2*time.Second), FinishedAt: beforeP(3*time.Hour - 47*time.Second),
	},
	"r-200": {
		ID: "r-200", Source: "hello", Workflow: "hello", Event: pushEvent("refs/heads/main"), Ref: "refs/heads/main",
		Status: runPending, CreatedAt: fakeNow,
		Jobs: []apiv1.Job{
			{ID: "j-20", Name: "lint", Status: "queued", Steps: []apiv1.Step{{Index: 0, Name: "check files", Status: "pending"}}},
		},
	},
	"r-201": {
		ID: "r-201", Source: "hello", Workflow: "hello", Event: pushEvent("refs/heads/broken"), Ref: "refs/heads/broken",
		Status: runPending, CreatedAt: fakeNow,
		Jobs: []apiv1.Job{
			{ID: "j-21", Name: "test", Status: "queued", Steps: []apiv1.Step{{Index: 0, Name: "work", Status: "pending"}}},
		},
	},
	"r-210": {
		ID: "r-210", Source: "multi", Workflow: "docs", Status: runPending, CreatedAt: fakeNow,
		Jobs: []apiv1.Job{{ID: "j-30", Name: "lint", Status: "queued"}},
	},
	// r-400's job prints what would drive a terminal: an OSC 52
	// clipboard write, a window title, a CR overwriting the line, colours.
	"r-400": {
		ID: "r-400", Source: "hello", Workflow: "hello", Event: pushEvent("refs/heads/evil"), Ref: "refs/heads/evil",
		Status: runRunning, CreatedAt: before(time.Minute), StartedAt: beforeP(time.Minute),
		Jobs: []apiv1.Job{{
			ID: "j-40", Name: "evil", Status: "running", RunsOn: []string{"linux"}, AgentID: "agent-1",
			Steps: []apiv1.Step{{Index: 0, Name: "print", Status: "running"}},
		}},
	},
	"r-104": {
		ID: "r-104", Source: "hello", Workflow: "ops", Event: json.RawMessage(`{"kind":"manual","provider":"manual","actor":"release-bot"}`),
		Actor: "release-bot", Ref: "refs/heads/main", SHA: "9f1c2e7d5b4a39c8e0f6a1b2c3d4e5f60718293a", Status: runPending, CreatedAt: fakeNow,
		Jobs: []apiv1.Job{{ID: "j-50", Name: "run", Status: "queued", RunsOn: []string{"linux"}}},
	},
	"r-300": {
		ID: "r-300", Source: "hello", Workflow: "hello", Status: runCancelled, Error: "cancelled by an operator",
		CreatedAt: before(time.Minute),
	},
}

// fakeRunList is GET /api/v1/runs, newest first.
var fakeRunList = []string{"r-103", "r-102", "r-101"}

func (f *fakeAPI) listSources(w http.ResponseWriter, r *http.Request) {
	sl := apiv1.SourceList{Sources: fakeSources}
	if f.empty {
		sl.Sources = []apiv1.Source{}
	}
	writeJSONStatus(w, http.StatusOK, sl)
}

func (f *fakeAPI) createSource(w http.ResponseWriter, r *http.Request) {
	var s apiv1.Source
	if !decode(w, r, &s) {
		return
	}
	if s.Name == "hello" {
		writeError(w, http.StatusConflict, fmt.Sprintf("source %q already exists", s.Name))
		return
	}
	var where string
	switch s.Kind {
	case "local":
		where = s.Path
	case "git":
		where = s.URL
	case "github":
		where = s.Repo
	}
	if where == "" {
		writeError(w, http.StatusBadRequest, "invalid source", fmt.Sprintf("kind %q needs its location", s.Kind))
		return
	}
	s.WebhookSecret = ""
	if s.ForkPullRequests == "" {
		s.ForkPullRequests = "approve"
	}
	s.CreatedAt = fakeNow
	writeJSONStatus(w, http.StatusCreated, s)
}

func (f *fakeAPI) deleteSource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name != "hello" {
		writeError(w, http.StatusNotFound, fmt.Sprintf("source %q not found", name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

var (
	helloMatched   = apiv1.Decision{Workflow: "hello", Matched: true, Reason: "push to main matched branches [main release/**]"}
	opsNotMatched  = apiv1.Decision{Workflow: "ops", Matched: false, Reason: "no trigger for event kind push"}
	helloNoFeature = apiv1.Decision{Workflow: "hello", Matched: false, Reason: `branch "feature" matches none of [main release/**]`}
)

func (f *fakeAPI) trigger(w http.ResponseWriter, r *http.Request) {
	var req apiv1.TriggerRequest
	if !decode(w, r, &req) {
		return
	}
	var resp apiv1.TriggerResponse
	for _, n := range req.Workflows {
		if r.PathValue("name") == "hello" && n != "hello" && n != "ops" {
			writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf(`no workflow named %q at commit 9f1c2e7d5b4a; the workflows there are: hello, ops`, n))
			return
		}
	}
	switch name := r.PathValue("name"); {
	case name == "hello" && slices.Equal(req.Workflows, []string{"ops"}):
		resp.Runs = []apiv1.RunRef{{ID: "r-104", Workflow: "ops"}}
		resp.Decisions = []apiv1.Decision{{Workflow: "ops", Matched: true, Reason: "manual run on the default branch matched the manual trigger"}}
	case name == "hello" && len(req.ChangedFiles) > 0:
		// hello filters paths [src/**] in this fake.
		for _, f := range req.ChangedFiles {
			if strings.HasPrefix(f, "src/") {
				resp.Runs = []apiv1.RunRef{{ID: "r-200", Workflow: "hello"}}
				resp.Decisions = []apiv1.Decision{{Workflow: "hello", Matched: true, Reason: fmt.Sprintf("push to main matched branches [main], paths [src/**] (%s)", f)}}
				writeJSONStatus(w, http.StatusOK, resp)
				return
			}
		}
		resp.Decisions = []apiv1.Decision{{Workflow: "hello", Matched: false, Reason: fmt.Sprintf("none of %d changed files matches paths [src/**]", len(req.ChangedFiles))}}
	case name == "multi":
		resp.Runs = []apiv1.RunRef{{ID: "r-200", Workflow: "hello"}, {ID: "r-210", Workflow: "docs"}}
	case name != "hello":
		writeError(w, http.StatusNotFound, fmt.Sprintf("source %q not found", name))
		return
	case req.Event == "manual":
		resp.Runs = []apiv1.RunRef{{ID: "r-200", Workflow: "hello"}}
		resp.Decisions = []apiv1.Decision{{Workflow: "hello", Matched: true, Reason: "manual trigger matched"}}
	case req.Ref == "feature":
		resp.Decisions = []apiv1.Decision{helloNoFeature, opsNotMatched}
	case req.Ref == "partly-invalid":
		// One valid workflow ran; two files of the commit are invalid
		// (one names itself with a control character).
		resp.Runs = []apiv1.RunRef{{ID: "r-202", Workflow: "hello"}}
		resp.Decisions = []apiv1.Decision{{Workflow: "hello", Matched: true, Reason: "push to partly-invalid matched branches [**]"}}
		resp.Problems = []string{".kici/workflows/deploy.yml:7:5: unknown key \"no-such-key\"", ".kici/workflows/\x1b[2Jwipe.yml:1:1: mapping values are not allowed here"}
	case req.Ref == "invalid-no-match":
		resp.Decisions = []apiv1.Decision{{Workflow: "hello", Matched: false, Reason: `branch "invalid-no-match" matches none of [main release/**]`}}
		resp.Problems = []string{".kici/workflows/deploy.yml:7:5: unknown key \"no-such-key\""}
	case req.Ref == "broken":
		resp.Runs = []apiv1.RunRef{{ID: "r-201", Workflow: "hello"}}
		resp.Decisions = []apiv1.Decision{{Workflow: "hello", Matched: true, Reason: "push to broken matched branches [**]"}, opsNotMatched}
	default:
		resp.Runs = []apiv1.RunRef{{ID: "r-200", Workflow: "hello"}}
		resp.Decisions = []apiv1.Decision{helloMatched, opsNotMatched}
	}
	writeJSONStatus(w, http.StatusOK, resp)
}

func (f *fakeAPI) listRuns(w http.ResponseWriter, r *http.Request) {
	rl := apiv1.RunList{Runs: []apiv1.Run{}}
	if f.empty {
		writeJSONStatus(w, http.StatusOK, rl)
		return
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	for _, id := range fakeRunList {
		run := fakeRuns[id]
		if (q.Get("status") != "" && run.Status != q.Get("status")) || (q.Get("source") != "" && run.Source != q.Get("source")) ||
			(q.Get("workflow") != "" && run.Workflow != q.Get("workflow")) ||
			(q.Get("branch") != "" && run.Ref != q.Get("branch") && run.Ref != "refs/heads/"+q.Get("branch")) {
			continue
		}
		if limit > 0 && len(rl.Runs) == limit {
			break
		}
		run.Jobs = nil
		rl.Runs = append(rl.Runs, run)
	}
	writeJSONStatus(w, http.StatusOK, rl)
}

// run answers 404 for an unknown run id.
func (f *fakeAPI) run(w http.ResponseWriter, r *http.Request) (apiv1.Run, bool) {
	id := r.PathValue("id")
	run, ok := fakeRuns[id]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %q not found", id))
	}
	return run, ok
}

func (f *fakeAPI) getRun(w http.ResponseWriter, r *http.Request) {
	if run, ok := f.run(w, r); ok {
		writeJSONStatus(w, http.StatusOK, run)
	}
}

func (f *fakeAPI) cancelRun(w http.ResponseWriter, r *http.Request) {
	run, ok := f.run(w, r)
	if !ok {
		return
	}
	var req apiv1.CancelRequest
	if !decode(w, r, &req) {
		return
	}
	if terminalRun(run.Status) {
		writeError(w, http.StatusConflict, fmt.Sprintf("run %q has already ended (%s)", run.ID, run.Status))
		return
	}
	if req.Force {
		run.Status, run.Error, run.FinishedAt = runCancelled, "cancelled by an operator (forced)", &fakeNow
	}
	writeJSONStatus(w, http.StatusOK, run)
}

func (f *fakeAPI) rerun(w http.ResponseWriter, r *http.Request) {
	run, ok := f.run(w, r)
	if !ok {
		return
	}
	var req apiv1.RerunRequest
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	if !req.Failed {
		writeJSONStatus(w, http.StatusOK, apiv1.RunRef{ID: "r-104", Workflow: run.Workflow})
		return
	}
	if !terminalRun(run.Status) {
		writeError(w, http.StatusConflict, fmt.Sprintf("rerun of the failed jobs of %q: run %s is %s: the run has not ended yet; wait for it to end, or cancel it", run.ID, run.ID, run.Status))
		return
	}
	writeJSONStatus(w, http.StatusCreated, apiv1.RunRef{ID: "r-105", Workflow: run.Workflow})
}

// evilLines are the log lines of r-400.
var evilLines = []string{
	"\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07copied",
	"all tests passed\rFAILED: 3 tests\x1b]0;kici: success\x1b\\",
	"\x1b[31mred\x1b[0m\tand a tab",
	"bell\x07 backspace\x08 del\x7f csi\u009b2J",
}

// fakeLogs are the pages of each job's log, by run and job id, by cursor.
var fakeLogs = map[string]map[string]apiv1.LogPage{
	"r-102/j-1": {
		"": {Lines: []apiv1.LogLine{{Step: 0, TS: before(time.Hour), Text: "lint ok for kici-hello"}}, Next: "1", Done: true},
	},
	"r-102/j-2": {
		"": {Lines: []apiv1.LogLine{
			{Step: 0, TS: before(time.Hour), Text: "hello from shard 1 on main"},
		}, Next: "1"},
		"1": {Lines: []apiv1.LogLine{
			{Step: 1, TS: before(time.Hour), Text: "shard 1 step 1"},
			{Step: 1, TS: before(time.Hour), Text: "boom: something broke\n"},
		}, Next: "3", Done: true},
	},
	"r-102/j-3": {"": {Next: "", Done: true}},
	"r-400/j-40": {
		"": {Lines: []apiv1.LogLine{
			{Step: 0, TS: before(time.Minute), Text: evilLines[0]},
			{Step: 0, TS: before(time.Minute), Text: evilLines[1]},
			{Step: 0, TS: before(time.Minute), Text: evilLines[2]},
			{Step: 0, TS: before(time.Minute), Text: evilLines[3]},
		}, Next: "4", Done: true},
	},
}

func (f *fakeAPI) logs(w http.ResponseWriter, r *http.Request) {
	run, ok := f.run(w, r)
	if !ok {
		return
	}
	job, ok := findJob(run.Jobs, r.PathValue("job"))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %q has no job %q", run.ID, r.PathValue("job")))
		return
	}
	cursor := r.URL.Query().Get("cursor")
	if run.ID == "r-103" {
		// A live job: a line, then two empty polls, then the rest.
		switch {
		case cursor == "":
			writeJSONStatus(w, http.StatusOK, apiv1.LogPage{Lines: []apiv1.LogLine{{Step: 0, Text: "compiling"}}, Next: "1"})
		case f.call("r-103 logs") <= 2:
			writeJSONStatus(w, http.StatusOK, apiv1.LogPage{Lines: []apiv1.LogLine{}, Next: "1"})
		default:
			writeJSONStatus(w, http.StatusOK, apiv1.LogPage{Lines: []apiv1.LogLine{{Step: 0, Text: "compiled"}, {Step: 1, Text: "ok  all tests passed"}}, Next: "3", Done: true})
		}
		return
	}
	page, ok := fakeLogs[run.ID+"/"+job.ID][cursor]
	if !ok {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bad cursor %q", cursor))
		return
	}
	if s := r.URL.Query().Get("step"); s != "" {
		n, _ := strconv.Atoi(s)
		var lines []apiv1.LogLine
		for _, l := range page.Lines {
			if l.Step == n {
				lines = append(lines, l)
			}
		}
		page.Lines = lines
	}
	page.Lines = nonNil(page.Lines)
	writeJSONStatus(w, http.StatusOK, page)
}

func evRun(id, status, errMsg string) apiv1.Event {
	return apiv1.Event{Kind: "run", RunID: id, Status: status, Error: errMsg}
}

func evJob(id, job, jobID, status, errMsg string) apiv1.Event {
	return apiv1.Event{Kind: "job", RunID: id, Job: job, JobID: jobID, Status: status, Error: errMsg}
}

func evStep(id, job, jobID string, step int, status string) apiv1.Event {
	return apiv1.Event{Kind: "step", RunID: id, Job: job, JobID: jobID, Step: &step, Status: status}
}

func evLog(id, job, jobID string, step int, texts ...string) apiv1.Event {
	e := apiv1.Event{Kind: "log", RunID: id, Job: job, JobID: jobID, Step: &step}
	for _, t := range texts {
		e.Lines = append(e.Lines, apiv1.LogLine{Step: step, TS: fakeNow, Text: t})
	}
	return e
}

// fakeEvents are each run's event streams, one slice per connection: a
// run with two connections ends its first one early, as a dropped stream.
var fakeEvents = map[string][][]apiv1.Event{
	"r-200": {{
		evRun("r-200", runRunning, ""),
		evJob("r-200", "lint", "j-20", "running", ""),
		evStep("r-200", "lint", "j-20", 0, "running"),
		evLog("r-200", "lint", "j-20", 0, "lint ok for kici-hello"),
		evStep("r-200", "lint", "j-20", 0, "success"),
		evJob("r-200", "lint", "j-20", "success", ""),
		evRun("r-200", runSuccess, ""),
	}},
	"r-201": {{
		evRun("r-201", runRunning, ""),
		evJob("r-201", "test", "j-21", "running", ""),
		evStep("r-201", "test", "j-21", 0, "running"),
		evLog("r-201", "test", "j-21", 0, "shard 1 step 1", "boom"),
		{Kind: "step", RunID: "r-201", Job: "test", JobID: "j-21", Step: intP(0), Status: "failure", Error: "exited with code 1"},
		evJob("r-201", "test", "j-21", "failure", `step "work": exited with code 1`),
		evRun("r-201", runFailure, `job "test" failed`),
	}},
	"r-210": {{
		evRun("r-210", runRunning, ""),
		evJob("r-210", "lint", "j-30", "running", ""),
		evLog("r-210", "lint", "j-30", 0, "docs ok"),
		evJob("r-210", "lint", "j-30", "success", ""),
		evRun("r-210", runSuccess, ""),
	}},
	"r-400": {{
		evRun("r-400", runRunning, ""),
		evJob("r-400", "evil", "j-40", "running", ""),
		evStep("r-400", "evil", "j-40", 0, "running"),
		evLog("r-400", "evil", "j-40", 0, evilLines...),
		{Kind: "step", RunID: "r-400", Job: "evil", JobID: "j-40", Step: intP(0), Status: "failure", Error: "exited\rwith code 1"},
		evJob("r-400", "evil", "j-40", "failure", "step \"print\": exited with code 1\x1b[2J"),
		evRun("r-400", runFailure, "job \"evil\" failed\x1b]0;all good\x07"),
	}},
	"r-103": {
		{
			evLog("r-103", "build", "j-10", 0, "compiling"),
		},
		{
			evLog("r-103", "build", "j-10", 0, "compiled"),
			evStep("r-103", "build", "j-10", 0, "success"),
			evStep("r-103", "build", "j-10", 1, "running"),
			evLog("r-103", "build", "j-10", 1, "ok  all tests passed"),
			evStep("r-103", "build", "j-10", 1, "success"),
			evJob("r-103", "build", "j-10", "success", ""),
			evRun("r-103", runSuccess, ""),
		},
	},
}

func (f *fakeAPI) events(w http.ResponseWriter, r *http.Request) {
	run, ok := f.run(w, r)
	if !ok {
		return
	}
	conns := fakeEvents[run.ID]
	n := f.call("events " + run.ID)
	if n > len(conns) {
		writeError(w, http.StatusGone, "no more events in this fake")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fmt.Fprint(w, ": connected\n\n")
	for _, e := range conns[n-1] {
		b, err := json.Marshal(e)
		if err != nil {
			f.t.Errorf("fake api: encode event: %v", err)
			return
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Kind, b)
		fl.Flush()
	}
}

// queue serves the queue one entry per page, whatever the limit, so that
// the CLI must follow next_cursor to see it all; the cursor is the index
// of the next entry.
func (f *fakeAPI) queue(w http.ResponseWriter, r *http.Request) {
	var all []apiv1.QueueEntry
	if !f.empty {
		all = []apiv1.QueueEntry{
			{
				JobID: "j-40", RunID: "r-105", Job: "build", Labels: []string{"linux", "gpu"}, Status: "queued",
				Enqueued: before(3 * time.Minute), WhyPending: `no connected agent has label "gpu"; no scaler offers it`,
			},
			{
				JobID: "j-41", RunID: "r-105", Job: "test", Labels: []string{"linux"}, Status: "dispatched",
				AgentID: "agent-1", Attempts: 2, Enqueued: before(40 * time.Second), WhyPending: "waiting for agent-1 to accept",
			},
		}
	}
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err != nil || n < 1 || n > 1000 {
		writeJSONStatus(w, http.StatusBadRequest, apiv1.Error{Error: fmt.Sprintf("limit %q: want 1 to 1000", r.URL.Query().Get("limit"))})
		return
	}
	at := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 || n >= len(all) {
			writeJSONStatus(w, http.StatusBadRequest, apiv1.Error{Error: fmt.Sprintf("cursor %q: not a next_cursor of this listing", c)})
			return
		}
		at = n
	}
	q := apiv1.Queue{Jobs: []apiv1.QueueEntry{}}
	if at < len(all) {
		q.Jobs = all[at : at+1]
	}
	if at+1 < len(all) {
		q.NextCursor = strconv.Itoa(at + 1)
	}
	writeJSONStatus(w, http.StatusOK, q)
}

// fakeDrains are the drained agents, by agent id: agent-1 is connected
// (and still busy), agent-7 and agent-9 are not.
var fakeDrains = []apiv1.AgentDrain{
	{AgentID: "agent-1", Reason: "kernel upgrade on ci-1", DrainedBy: "ops lead", DrainedAt: before(10 * time.Minute)},
	{AgentID: "agent-7", Reason: "disk replacement", DrainedBy: "alice laptop", DrainedAt: before(2 * 24 * time.Hour)},
	{AgentID: "agent-9", DrainedBy: "bootstrap", DrainedAt: before(3 * 24 * time.Hour)},
}

func (f *fakeAPI) agents(w http.ResponseWriter, r *http.Request) {
	al := apiv1.AgentList{Agents: []apiv1.Agent{}, Drains: []apiv1.AgentDrain{}}
	if !f.empty {
		al.Agents = []apiv1.Agent{
			{
				ID: "agent-1", Labels: []string{"linux", "kici:os:linux", "kici:arch:amd64"}, BusyJobs: []string{"j-10"},
				Backend: "baremetal", Version: "0.1.0", Hostname: "ci-1", ConnectedAt: before(2 * time.Hour),
				Draining: true,
			},
			{
				ID: "agent-2", Labels: []string{"linux", "docker"}, BusyJobs: []string{}, Backend: "container",
				ConnectedAt: before(5 * time.Minute),
			},
		}
		al.Drains = fakeDrains
	}
	writeJSONStatus(w, http.StatusOK, al)
}

// auditor answers 403 to the auditor token, as the orchestrator does for
// a permission the role lacks.
func (f *fakeAPI) auditor(w http.ResponseWriter, r *http.Request, permission string) bool {
	if r.Header.Get("Authorization") != "Bearer "+fakeAuditorToken {
		return false
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("role %q does not have permission %q", "auditor", permission))
	return true
}

// drainAgent drains any agent id, connected or not, as the orchestrator
// does; draining again replaces the reason.
func (f *fakeAPI) drainAgent(w http.ResponseWriter, r *http.Request) {
	if f.auditor(w, r, "scaler.manage") {
		return
	}
	var req apiv1.AgentDrainRequest
	if !decode(w, r, &req) {
		return
	}
	writeJSONStatus(w, http.StatusOK, apiv1.AgentDrain{
		AgentID: r.PathValue("id"), Reason: req.Reason, DrainedBy: "ops lead", DrainedAt: fakeNow,
	})
}

// undrainAgent lifts one of fakeDrains: 204, or 404 for an agent that is
// not drained.
func (f *fakeAPI) undrainAgent(w http.ResponseWriter, r *http.Request) {
	if f.auditor(w, r, "scaler.manage") {
		return
	}
	id := r.PathValue("id")
	if !slices.ContainsFunc(fakeDrains, func(d apiv1.AgentDrain) bool { return d.AgentID == id }) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("agent %q is not drained", id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeAPI) createAgentToken(w http.ResponseWriter, r *http.Request) {
	var req apiv1.AgentTokenRequest
	if !decode(w, r, &req) {
		return
	}
	writeJSONStatus(w, http.StatusCreated, apiv1.AgentToken{ID: "at-7", Token: "kat_3q9Zx0mPLr8VtYk2", Labels: req.Labels})
}
