package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// browser is an HTTP client with its own cookies, as a browser session.
type browser struct {
	t    *testing.T
	o    *orchestrator
	c    *http.Client
	base string
}

func newBrowser(t *testing.T, o *orchestrator) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{t: t, o: o, c: c, base: "http://" + o.addr}
}

// page is an answer: its status, the Location of a redirect, the body and
// the headers.
type page struct {
	status   int
	location string
	body     string
	header   http.Header
}

func (b *browser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(data), header: resp.Header}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil) }

func (b *browser) login(token string) page {
	b.t.Helper()
	return b.do(http.MethodPost, "/login", url.Values{"token": {token}})
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of a page's forms.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the page has no CSRF field:\n%s", p.body)
	}
	return m[1]
}

// TestDashboardSessionsPagesAndCancel: the dashboard over real HTTP on
// both engines. Without a session / redirects to /login; a wrong token is
// refused; a good one sets an HttpOnly, SameSite=Strict cookie; every page
// answers 200; job output is escaped before it is coloured (a <script>
// line is text); a post without the CSRF token is refused and changes
// nothing; an auditor's run page has no cancel button and its post is
// refused by the API's permission check; an admin's cancel stops the run;
// revoking the token ends its session, and logging out ends one too.
func TestDashboardSessionsPagesAndCancel(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		marks := t.TempDir()
		o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  show:
    steps:
      - run: |
          echo '<script>alert(1)</script>'
          printf '\033[31mred text\033[0m plain\n'
          touch %[1]s/started
          while [ ! -e %[1]s/never ]; do sleep 0.1; done
`, marks)})
		startAgent(t, o, "", "dash-agent", nil)
		id := o.push(t)
		waitFor(t, 30*time.Second, "the step to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
		waitFor(t, 30*time.Second, "the step's output stored", func() bool {
			return slices.ContainsFunc(o.logs(t, id, "show"), func(l string) bool { return strings.Contains(l, "red text") })
		})

		b := newBrowser(t, o)
		if p := b.get("/"); p.status != http.StatusSeeOther || p.location != "/login" {
			t.Fatalf("/ without a session: %d → %q, want 303 to /login", p.status, p.location)
		}
		if p := b.get("/runs"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/login") {
			t.Fatalf("/runs without a session: %d → %q, want a redirect to /login", p.status, p.location)
		}
		if p := b.login("kici_not-a-token"); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "not valid") {
			t.Fatalf("login with a wrong token: %d, want 401 saying so", p.status)
		}
		p := b.login(o.token)
		if p.status != http.StatusSeeOther || p.location != "/runs" {
			t.Fatalf("login: %d → %q, want 303 to /runs", p.status, p.location)
		}
		cookie := strings.Join(p.header.Values("Set-Cookie"), "; ")
		for _, want := range []string{"kici_session=", "HttpOnly", "SameSite=Strict", "Path=/"} {
			if !strings.Contains(cookie, want) {
				t.Errorf("session cookie %q lacks %s", cookie, want)
			}
		}

		for _, path := range []string{"/runs", "/runs/" + id, "/queue", "/agents", "/scalers", "/sources", "/peers", "/audit", "/secrets"} {
			p := b.get(path)
			if p.status != http.StatusOK || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
				t.Errorf("%s: %d %s, want 200 HTML", path, p.status, p.header.Get("Content-Type"))
			}
			csp := p.header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
				t.Errorf("%s: Content-Security-Policy %q, want scripts from self and nothing inline", path, csp)
			}
		}
		if p := b.get("/runs"); !strings.Contains(p.body, `href="/runs/`+id+`"`) {
			t.Errorf("the runs page does not link run %s", id)
		}
		r := o.run(t, id)
		branch := strings.TrimPrefix(r.Ref, "refs/heads/")
		for _, f := range []struct {
			query string
			shown bool
		}{
			{"?workflow=" + url.QueryEscape(r.Workflow) + "&branch=" + url.QueryEscape(branch), true},
			{"?branch=" + url.QueryEscape(r.Ref), true},
			{"?branch=no-such-branch", false},
			{"?workflow=no-such-workflow&status=running", false},
		} {
			if p := b.get("/runs" + f.query); strings.Contains(p.body, `href="/runs/`+id+`"`) != f.shown {
				t.Errorf("the runs page filtered by %s: shows run %s %t, want %t", f.query, id, !f.shown, f.shown)
			}
		}
		run := b.get("/runs/" + id)
		if strings.Contains(run.body, "<script>alert(1)") || !strings.Contains(run.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("the <script> line is not shown as text:\n%s", run.body)
		}
		if strings.Contains(run.body, "\x1b") || !strings.Contains(run.body, "red text</span>") {
			t.Errorf("the coloured line is not converted to a span without its escape codes")
		}
		if !strings.Contains(run.body, `id="cancel"`) {
			t.Fatalf("an admin's run page has no cancel button")
		}

		// No CSRF token: refused, and the run goes on.
		if p := b.do(http.MethodPost, "/runs/"+id+"/cancel", url.Values{}); p.status != http.StatusForbidden || !strings.Contains(p.body, "CSRF") {
			t.Fatalf("cancel without a CSRF token: %d, want 403 naming the CSRF token", p.status)
		}
		if p := b.do(http.MethodPost, "/runs/"+id+"/cancel", url.Values{"csrf": {"forged"}}); p.status != http.StatusForbidden {
			t.Fatalf("cancel with a forged CSRF token: %d, want 403", p.status)
		}

		// An auditor sees the run without a cancel button, and is refused
		// by the API's permission check if it posts anyway.
		var aud apiv1.AdminToken
		o.api(t, "POST", "/api/v1/tokens", apiv1.AdminTokenRequest{Name: "dash-auditor", Role: "auditor"}, &aud, http.StatusCreated)
		ab := newBrowser(t, o)
		if p := ab.login(aud.Token); p.status != http.StatusSeeOther {
			t.Fatalf("auditor login: %d", p.status)
		}
		arun := ab.get("/runs/" + id)
		if arun.status != http.StatusOK || strings.Contains(arun.body, `id="cancel"`) {
			t.Fatalf("auditor's run page: %d, cancel button shown %t; want 200 without it", arun.status, strings.Contains(arun.body, `id="cancel"`))
		}
		if p := ab.do(http.MethodPost, "/runs/"+id+"/cancel", url.Values{"csrf": {arun.csrf(t)}}); p.status != http.StatusForbidden || !strings.Contains(p.body, "run.cancel") {
			t.Fatalf("auditor's cancel: %d, want 403 naming the permission:\n%s", p.status, p.body)
		}
		if r := o.run(t, id); r.Status != "running" {
			t.Fatalf("after refused cancels the run is %s, want running", r.Status)
		}

		// The admin cancels from the page.
		if p := b.do(http.MethodPost, "/runs/"+id+"/cancel", url.Values{"csrf": {run.csrf(t)}}); p.status != http.StatusSeeOther || p.location != "/runs/"+id {
			t.Fatalf("cancel: %d → %q, want 303 back to the run", p.status, p.location)
		}
		if r := o.waitRun(t, id, 30*time.Second, "the run to end", ended); r.Status != "cancelled" {
			t.Fatalf("run after the page's cancel: %s, want cancelled", r.Status)
		}

		// Rerun, drain and trigger from the pages; the auditor may do none.
		if p := ab.do(http.MethodPost, "/agents/dash-agent/drain", url.Values{"csrf": {arun.csrf(t)}}); p.status != http.StatusForbidden {
			t.Errorf("auditor's drain: %d, want 403", p.status)
		}
		done := b.get("/runs/" + id)
		if !strings.Contains(done.body, `id="rerun"`) || strings.Contains(done.body, `id="cancel"`) {
			t.Errorf("an ended run's page: want a rerun button and no cancel button")
		}
		p = b.do(http.MethodPost, "/runs/"+id+"/rerun", url.Values{"csrf": {run.csrf(t)}})
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/runs/") || p.location == "/runs/"+id {
			t.Fatalf("rerun: %d → %q, want 303 to the new run", p.status, p.location)
		}
		if child := o.run(t, strings.TrimPrefix(p.location, "/runs/")); child.ParentRun != id {
			t.Errorf("the rerun's parent: %q, want %s", child.ParentRun, id)
		}
		o.api(t, "POST", "/api/v1/runs/"+strings.TrimPrefix(p.location, "/runs/")+"/cancel", nil, nil, http.StatusOK)
		if p := b.do(http.MethodPost, "/agents/dash-agent/drain", url.Values{"csrf": {run.csrf(t)}, "reason": {"maintenance"}}); p.status != http.StatusSeeOther {
			t.Fatalf("drain: %d", p.status)
		}
		if ag := b.get("/agents"); !strings.Contains(ag.body, "Undrain") {
			t.Errorf("the agents page does not show the drained agent as drained")
		}
		if p := b.do(http.MethodPost, "/agents/dash-agent/undrain", url.Values{"csrf": {run.csrf(t)}}); p.status != http.StatusSeeOther {
			t.Fatalf("undrain: %d", p.status)
		}
		p = b.do(http.MethodPost, "/sources/repo/trigger", url.Values{"csrf": {run.csrf(t)}, "event": {"push"}})
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/runs/") {
			t.Fatalf("trigger from the sources page: %d → %q", p.status, p.location)
		}
		o.api(t, "POST", "/api/v1/runs/"+strings.TrimPrefix(p.location, "/runs/")+"/cancel", nil, nil, http.StatusOK)

		// Revoking the auditor's token ends its session.
		o.api(t, "DELETE", "/api/v1/tokens/"+aud.ID, nil, nil, http.StatusOK)
		if p := ab.get("/runs"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/login") {
			t.Errorf("a session of a revoked token: %d → %q, want a redirect to /login", p.status, p.location)
		}
		// Logging out ends the admin's (a plain POST /logout, as the
		// contract has it).
		if p := b.do(http.MethodPost, "/logout", nil); p.status != http.StatusSeeOther || p.location != "/login" {
			t.Fatalf("logout: %d → %q, want 303 to /login", p.status, p.location)
		}
		if p := b.get("/runs"); p.status != http.StatusSeeOther {
			t.Errorf("after logout /runs answers %d, want a redirect to /login", p.status)
		}
	})
}

// TestDashboardLongLogWindowsAndSearch: a job of 100,000 lines. The run
// page holds its first lines only; a window from line 99,990 comes back
// numbered and in order; a search over the whole stored log finds the one
// line that matches, past the page's lines; bad windows and queries are
// refused. It logs how long the windows took, cold and warm.
func TestDashboardLongLogWindowsAndSearch(t *testing.T) {
	t.Parallel()
	o := startOrchestrator(t, "")
	o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  long:
    steps:
      - run: seq 1 100000 | sed 's/^/row /'
`})
	startAgent(t, o, "", "long-agent", nil)
	id := o.push(t)
	if r := o.waitRun(t, id, 120*time.Second, "the run to end", ended); r.Status != "success" {
		t.Fatalf("run: %s (%s)", r.Status, r.Error)
	}
	b := newBrowser(t, o)
	if p := b.login(o.token); p.status != http.StatusSeeOther {
		t.Fatalf("login: %d", p.status)
	}
	page := b.get("/runs/" + id)
	if page.status != http.StatusOK || !strings.Contains(page.body, `id="long-L5000"`) || strings.Contains(page.body, `id="long-L5001"`) {
		t.Fatalf("run page: %d; want the first 5,000 lines only", page.status)
	}

	type window struct {
		Lines []struct {
			N    int    `json:"n"`
			HTML string `json:"html"`
		} `json:"lines"`
		Total int  `json:"total"`
		Done  bool `json:"done"`
	}
	getJSON := func(path string, out any) (int, time.Duration) {
		t.Helper()
		start := time.Now()
		p := b.get(path)
		took := time.Since(start)
		if p.status == http.StatusOK {
			if err := json.Unmarshal([]byte(p.body), out); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return p.status, took
	}
	var search struct {
		Matches   []int `json:"matches"`
		Truncated bool  `json:"truncated"`
		Total     int   `json:"total"`
	}
	status, searchTook := getJSON("/runs/"+id+"/jobs/long/search?q=ROW+99990", &search)
	if status != http.StatusOK || len(search.Matches) != 1 || search.Matches[0] <= 5000 || search.Truncated {
		t.Fatalf("search for row 99990: %d %+v, want one match past the page's lines", status, search)
	}
	n := search.Matches[0]
	var w window
	status, cold := getJSON(fmt.Sprintf("/runs/%s/jobs/long/lines?from=%d&count=20", id, n), &w)
	if status != http.StatusOK || len(w.Lines) == 0 || w.Lines[0].N != n || !strings.Contains(w.Lines[0].HTML, "row 99990") || !w.Done || w.Total < n+10 {
		t.Fatalf("window at line %d: %d %+v", n, status, w)
	}
	for i, l := range w.Lines {
		if l.N != n+i {
			t.Fatalf("window line %d numbered %d, want %d", i, l.N, n+i)
		}
	}
	var w2 window
	_, warm := getJSON(fmt.Sprintf("/runs/%s/jobs/long/lines?from=%d&count=20", id, n-5), &w2)
	if len(w2.Lines) != min(20, w.Total-(n-5)+1) || w2.Lines[5].N != n || w2.Lines[5].HTML != w.Lines[0].HTML {
		t.Fatalf("second window: %+v, want line %d at index 5 again", w2, n)
	}
	raw := b.get("/runs/" + id + "/jobs/long/raw")
	if raw.status != http.StatusOK || strings.Count(raw.body, "\n") != w.Total || !strings.Contains(raw.body, " row 100000\n") ||
		!strings.Contains(raw.header.Get("Content-Disposition"), "attachment") {
		t.Errorf("raw download: %d, %d lines (want %d), disposition %q", raw.status, strings.Count(raw.body, "\n"), w.Total, raw.header.Get("Content-Disposition"))
	}
	for _, bad := range []string{"lines?from=0&count=5", "lines?from=1&count=5000", "lines?from=x&count=1", "search?q=", "search?q=" + strings.Repeat("a", 201)} {
		if p := b.get("/runs/" + id + "/jobs/long/" + bad); p.status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, p.status)
		}
	}
	t.Logf("100,000-line log: search %s; window at line %d cold %s, warm %s (total %d lines)", searchTook.Round(time.Millisecond), n, cold.Round(time.Millisecond), warm.Round(time.Millisecond), w.Total)
}
