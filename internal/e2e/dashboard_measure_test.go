package e2e

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// measureDashboard turns on TestMeasureDashboard, a measurement for
// docs/benchmarks.md, not a check: go test ./internal/e2e/ -run
// TestMeasureDashboard -measure-dashboard -v.
var measureDashboard = flag.Bool("measure-dashboard", false, "measure the dashboard's run page and the memory of its live viewers")

// TestMeasureDashboard measures, on SQLite: the run page of a finished
// 50-job run (time to first byte and to the last byte, 30 loads); the run
// page of a job with a 100,000-line log (which holds its first 5,000
// lines) and a window at its end; and the orchestrator's resident memory
// added per live viewer (100 event streams of a running run held open).
// It reports and asserts no time.
func TestMeasureDashboard(t *testing.T) {
	if !*measureDashboard {
		t.Skip("a measurement: run with -measure-dashboard")
	}
	o := startOrchestrator(t, "")
	var jobs strings.Builder
	jobs.WriteString("on: {push: {}}\njobs:\n")
	for i := range 50 {
		fmt.Fprintf(&jobs, "  j%02d:\n", i)
		if i > 0 {
			fmt.Fprintf(&jobs, "    needs: [j%02d]\n", (i-1)/2)
		}
		fmt.Fprintf(&jobs, "    steps: [{run: 'for i in 1 2 3 4 5 6 7 8 9 10; do echo \"job %d line $i\"; done'}]\n", i)
	}
	o.addRepo(t, map[string]string{"ci.yml": jobs.String(), "long.yml": `
on: {push: {}}
jobs:
  long:
    steps:
      - run: seq 1 100000 | sed 's/^/row /'
`, "live.yml": `
on: {push: {}}
jobs:
  live:
    steps:
      - run: sleep 600
`})
	startAgent(t, o, "", "m-agent", nil, "KICI_AGENT_CONCURRENCY=4")
	var tr struct {
		Runs []struct {
			ID       string `json:"id"`
			Workflow string `json:"workflow"`
		} `json:"runs"`
	}
	o.api(t, "POST", "/api/v1/sources/repo/trigger", map[string]string{"event": "push"}, &tr, http.StatusOK)
	ids := map[string]string{}
	for _, r := range tr.Runs {
		ids[r.Workflow] = r.ID
	}
	for _, wf := range []string{"ci", "long"} {
		if r := o.waitRun(t, ids[wf], 300*time.Second, "the "+wf+" run to end", ended); r.Status != "success" {
			t.Fatalf("%s run: %s (%s)", wf, r.Status, r.Error)
		}
	}
	b := newBrowser(t, o)
	if p := b.login(o.token); p.status != http.StatusSeeOther {
		t.Fatalf("login: %d", p.status)
	}
	timed := func(path string) (first, all time.Duration, size int) {
		req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
		start := time.Now()
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if _, err := br.Peek(1); err != nil {
			t.Fatal(err)
		}
		first = time.Since(start)
		n, _ := io.Copy(io.Discard, br)
		return first, time.Since(start), int(n) + 1
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))].Round(100 * time.Microsecond)
	}
	// The outline of the long job: the first read scans the whole log, the
	// later ones only what was added.
	f, a, n := timed("/runs/" + ids["long"] + "/jobs/long/outline")
	t.Logf("outline of the 100,000-line job, first read: first byte %s, complete %s, %d bytes", f.Round(100*time.Microsecond), a.Round(100*time.Microsecond), n)
	for _, m := range []struct{ name, path string }{
		{"outline of that job, read again", "/runs/" + ids["long"] + "/jobs/long/outline"},
		{"run page, 50 jobs", "/runs/" + ids["ci"]},
		{"run page, 100,000-line job (first 5,000 lines)", "/runs/" + ids["long"]},
		{"window at line 99,990 of that job", "/runs/" + ids["long"] + "/jobs/long/lines?from=99990&count=100"},
	} {
		var firsts, alls []time.Duration
		size := 0
		for range 30 {
			f, a, n := timed(m.path)
			firsts, alls, size = append(firsts, f), append(alls, a), n
		}
		t.Logf("%s: first byte p50 %s p90 %s; complete p50 %s p90 %s; %d bytes", m.name, q(firsts, .5), q(firsts, .9), q(alls, .5), q(alls, .9), size)
	}

	// Memory per live viewer: 100 event streams of a running run.
	live := ids["live"]
	waitFor(t, 60*time.Second, "the live run to run", func() bool { return o.run(t, live).Status == "running" })
	before := rss(t, o.cmd.Process.Pid)
	var bodies []io.Closer
	for range 100 {
		// As the page opens it: from the position where its lines end.
		req, _ := http.NewRequest(http.MethodGet, b.base+"/runs/"+live+"/events?from=0:-1:0", nil)
		resp, err := b.c.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("event stream: %v %v", err, resp)
		}
		bodies = append(bodies, resp.Body)
	}
	time.Sleep(2 * time.Second) // let the streams settle: a measurement, not a check
	after := rss(t, o.cmd.Process.Pid)
	for _, c := range bodies {
		_ = c.Close()
	}
	t.Logf("100 live viewers: resident memory %d kB → %d kB, %.1f kB per viewer", before, after, float64(after-before)/100)
	o.api(t, "POST", "/api/v1/runs/"+live+"/cancel", nil, nil, http.StatusOK)
}

// rss is a process's resident set size in kB.
func rss(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
