package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/kici-dev/kici/internal/apiv1"
)

// screenshotDir, when set, is where TestDashboardScreenshots writes its
// images (docs/img is made with -screenshots ../../docs/img).
var screenshotDir = flag.String("screenshots", "", "directory for the PNGs of TestDashboardScreenshots (default: a temporary one)")

// stepTimeout bounds one browser step (an action, or a wait for the page
// to show something).
const stepTimeout = 45 * time.Second

// do runs browser actions in the tab, failing the test with what if one
// fails (and logging the page, to see why).
func do(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		logPage(t, tab)
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one browser action that returns a value.
func get[T any](t *testing.T, tab context.Context, what string, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		logPage(t, tab)
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitJS waits until a JavaScript expression of the page is true.
func waitJS(t *testing.T, tab context.Context, what, expr string) {
	t.Helper()
	get(t, tab, "wait for "+what, chromedp.Poll[bool](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
}

// logPage logs the tab's address and document, if it can still read them.
func logPage(t *testing.T, tab context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	t.Logf("the page at %s:\n%s", loc, html)
}

// logTexts is a page expression: the text of every log line shown.
const logTexts = `[...document.querySelectorAll("ol.log li .t")].map(e => e.textContent)`

// browserLogin logs in from the login page the tab shows, as a person
// would: types the token and presses the button.
func browserLogin(t *testing.T, tab context.Context, token string) {
	t.Helper()
	do(t, tab, "log in",
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`form:has(#token) button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`header.top form.who`)), // on a page of the session
	)
}

// TestDashboardInBrowser drives the dashboard in Chromium against real
// processes: / leads to the login page; the admin token logs in; the runs
// page links the run; the run page shows a <script> line of job output
// as text (no dialog opens: newTab fails the test on one, and on any
// console error or CSP violation) and its colours as styled spans; a
// line printed after the page loaded appears without a reload (the page's
// script, over Server-Sent Events); an auditor, in a session of its own,
// sees the run without a cancel button; the admin's cancel button stops
// the run, and the page shows it cancelled.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	o := startOrchestrator(t, "")
	marks := t.TempDir()
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  show:
    steps:
      - name: gated
        run: |
          echo '<script>alert(1)</script>'
          printf '\033[32mgreen text\033[0m plain\n'
          touch %[1]s/started
          while [ ! -e %[1]s/gate1 ]; do sleep 0.1; done
          echo 'after the gate'
          printf '\033[31mlive red\033[0m\n'
          while [ ! -e %[1]s/gate2 ]; do sleep 0.1; done
`, marks)})
	startAgent(t, o, "", "browser-agent", nil)
	id := o.push(t)
	waitFor(t, 30*time.Second, "the step to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
	waitFor(t, 30*time.Second, "the step's output stored", func() bool {
		return slices.ContainsFunc(o.logs(t, id, "show"), func(l string) bool { return strings.Contains(l, "green text") })
	})
	base := "http://" + o.addr

	tab := newTab(t)
	do(t, tab, "open /", chromedp.Navigate(base+"/"))
	if loc := get(t, tab, "read the address", chromedp.Location()); loc != base+"/login" {
		t.Fatalf("/ without a session led to %s, want %s/login", loc, base)
	}
	browserLogin(t, tab, o.token)
	if loc := get(t, tab, "read the address", chromedp.Location()); loc != base+"/runs" {
		t.Fatalf("the login led to %s, want %s/runs", loc, base)
	}
	runLink := chromedp.CSS(`a[href="/runs/` + id + `"]`)
	do(t, tab, "find the run on the runs page", chromedp.WaitVisible(runLink))

	// Open the run page, and wait until its script's event stream has
	// delivered the first event (the run's status): from then on the page
	// sees every line the job prints.
	streamCtx, cancelStream := context.WithTimeout(tab, stepTimeout)
	defer cancelStream()
	stream := chromedp.Events(streamCtx, network.EventSourceMessageReceived)
	do(t, tab, "open the run page", chromedp.Click(runLink), chromedp.WaitVisible(chromedp.ID("run-status")))
	for ev, err := range stream {
		if err != nil {
			logPage(t, tab)
			t.Fatalf("the run page's event stream delivered nothing: %v", err)
		}
		if ev.EventName == "run" {
			break
		}
	}
	cancelStream()

	lines := get(t, tab, "read the log lines", chromedp.Evaluate[[]string](logTexts))
	if !slices.Contains(lines, "<script>alert(1)</script>") {
		t.Errorf("no log line reads <script>alert(1)</script> as text; the lines: %q", lines)
	}
	if n := get(t, tab, "count scripts in the page's body", chromedp.Evaluate[int](`document.body.querySelectorAll("script").length`)); n != 0 {
		t.Errorf("the page's body holds %d <script> elements, want none", n)
	}
	type colour struct {
		Class  string `json:"class"`
		Colour string `json:"colour"`
		Plain  string `json:"plain"`
	}
	green := get(t, tab, "read the coloured line", chromedp.Evaluate[colour](`(() => {
		const t = [...document.querySelectorAll("ol.log li .t")].find(e => e.textContent === "green text plain");
		const s = t && t.querySelector("span");
		return s ? {class: s.className, colour: getComputedStyle(s).color, plain: getComputedStyle(t).color} : {};
	})()`))
	if green.Class == "" || green.Colour == green.Plain {
		t.Errorf("the coloured line: span %+v, want a class whose colour differs from the plain text's", green)
	}

	// A line printed now reaches the page live.
	do(t, tab, "mark the document", chromedp.Evaluate[chromedp.Void](`window.kiciTestMark = "no reload"`))
	if err := touch(filepath.Join(marks, "gate1")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, "the line printed after the gate", logTexts+`.includes("after the gate")`)
	if mark := get(t, tab, "read the mark", chromedp.Evaluate[string](`String(window.kiciTestMark)`)); mark != "no reload" {
		t.Errorf("the page was reloaded to show the new line (mark %q)", mark)
	}
	if n := get(t, tab, "count the new line", chromedp.Evaluate[int](logTexts+`.filter(l => l === "after the gate").length`)); n != 1 {
		t.Errorf("the page shows the new line %d times, want once", n)
	}
	// A coloured live line gets its colour from the server a moment later.
	waitJS(t, tab, "the live coloured line coloured", `(() => {
		const t = [...document.querySelectorAll("ol.log li .t")].find(e => e.textContent === "live red");
		return !!t && !!t.querySelector("span.a-fg1"); })()`)

	// An auditor, logged in in a browser context of its own (no cookie of
	// the admin's), sees the running run without a cancel button.
	var aud apiv1.AdminToken
	o.api(t, "POST", "/api/v1/tokens", apiv1.AdminTokenRequest{Name: "browser-auditor", Role: "auditor"}, &aud, http.StatusCreated)
	atab := newTab(t)
	do(t, atab, "open the run page without a session", chromedp.Navigate(base+"/runs/"+id))
	browserLogin(t, atab, aud.Token)
	if loc := get(t, atab, "read the address", chromedp.Location()); loc != base+"/runs/"+id {
		t.Fatalf("the auditor's login led to %s, want back to the run page %s/runs/%s", loc, base, id)
	}
	do(t, atab, "see the run's status", chromedp.WaitVisible(chromedp.ID("run-status")))
	if st := get(t, atab, "read the run's status", chromedp.Text(chromedp.ID("run-status"))); st != "running" {
		t.Errorf("the auditor's run page says %q, want running", st)
	}
	if has := get(t, atab, "look for a cancel button", chromedp.Evaluate[bool](`document.getElementById("cancel") !== null`)); has {
		t.Errorf("the auditor's run page has a cancel button")
	}
	if who := get(t, atab, "read who is logged in", chromedp.Text(chromedp.CSS("header.top form.who span"))); !strings.Contains(who, "auditor") {
		t.Errorf("the header says %q, want the auditor's role", who)
	}

	// The admin cancels from the page: the form posts, the answer leads
	// back to the run page, which shows the run cancelled (at once, or
	// when the stream says so) and no cancel button any more.
	ctx, cancel := context.WithTimeout(tab, stepTimeout)
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.ID("cancel")))
	cancel()
	if err != nil {
		logPage(t, tab)
		t.Fatalf("press cancel: %v", err)
	}
	if resp.Status != http.StatusOK || resp.URL != base+"/runs/"+id {
		t.Fatalf("cancel led to %d %s, want 200 %s/runs/%s", resp.Status, resp.URL, base, id)
	}
	waitJS(t, tab, "the run page to show the run cancelled",
		`document.getElementById("run-status").textContent === "cancelled" && document.getElementById("cancel") === null`)
	if r := o.waitRun(t, id, 30*time.Second, "the run to end", ended); r.Status != "cancelled" {
		t.Fatalf("the API says the run is %s, want cancelled", r.Status)
	}
}

// TestDashboardScreenshots takes full-page screenshots of the dashboard's
// main pages, in the light and the dark colour scheme, with content in
// them: a finished run of four jobs (one failed, one skipped, coloured
// output), a run whose job waits in the queue for a label no agent has,
// two agents. Each image must decode and not be blank, and the dark ones
// must be darker. With -screenshots DIR they are kept in DIR as
// dashboard-<page>-<light|dark>.png (docs/dashboard.md shows them).
func TestDashboardScreenshots(t *testing.T) {
	t.Parallel()
	dir := *screenshotDir
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o := startOrchestrator(t, "")
	o.addRepo(t, map[string]string{
		"ci.yml": `
on: {push: {}}
jobs:
  build:
    steps:
      - name: compile
        run: |
          printf '\033[1mBuilding\033[0m kici for linux/amd64\n'
          echo 'go build -trimpath ./cmd/...'
          printf '\033[32mok\033[0m  4 binaries in bin/\n'
      - name: package
        run: echo 'wrote dist/kici-linux-amd64.tar.gz (12.4 MiB)'
  lint:
    steps:
      - name: vet
        run: |
          printf '\033[36mgo vet\033[0m ./...: no problems found\n'
  test:
    needs: [build]
    steps:
      - name: unit tests
        run: |
          printf '=== RUN   TestQueueOrder\n'
          printf '\033[32m--- PASS\033[0m: TestRunsPage (0.01s)\n'
          printf '    queue_test.go:42: got \033[1;33m3\033[0m jobs, want \033[1;33m2\033[0m\n'
          printf '\033[31m--- FAIL\033[0m: TestQueueOrder (0.02s)\n'
          printf '\033[41;97m FAIL \033[0m github.com/kici-dev/kici/internal/dispatch\n'
          exit 1
  deploy:
    needs: [test]
    steps:
      - run: echo deploying
`,
		"gpu.yml": `
on: {push: {}}
jobs:
  train:
    runs-on: [gpu]
    steps:
      - run: echo training
`,
	})
	startAgent(t, o, "", "builder-1", []string{"linux"})
	startAgent(t, o, "", "builder-2", []string{"linux", "docker"})
	trigger := func(workflow string) string {
		var tr apiv1.TriggerResponse
		o.api(t, "POST", "/api/v1/sources/repo/trigger", apiv1.TriggerRequest{Event: "push", Ref: "main", Workflows: []string{workflow}}, &tr, http.StatusOK)
		if len(tr.Runs) != 1 {
			t.Fatalf("trigger %s started %d runs, want 1: %+v", workflow, len(tr.Runs), tr.Decisions)
		}
		return tr.Runs[0].ID
	}
	ci := trigger("ci")
	if r := o.waitRun(t, ci, 60*time.Second, "the ci run to end", ended); r.Status != "failure" {
		t.Fatalf("the ci run ended %s, want failure", r.Status)
	}
	base := "http://" + o.addr
	tab := newTab(t)
	do(t, tab, "size the window", chromedp.EmulateViewport(1280, 800))
	do(t, tab, "open the login page", chromedp.Navigate(base+"/login"))
	browserLogin(t, tab, o.token)

	// The queue page, open before the gpu job is queued, shows it without
	// a reload: its table follows the queue.
	do(t, tab, "open the queue page", chromedp.Navigate(base+"/queue"), chromedp.WaitVisible(chromedp.ID("queue")),
		chromedp.Evaluate[chromedp.Void](`window.kiciTestMark = "no reload"`))
	gpu := trigger("gpu")
	waitFor(t, 30*time.Second, "the gpu job in the queue", func() bool {
		var q apiv1.Queue
		o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
		return slices.ContainsFunc(q.Jobs, func(j apiv1.QueueEntry) bool { return j.RunID == gpu })
	})
	waitJS(t, tab, "the open queue page to show the gpu job", `document.querySelector('#queue a[href="/runs/`+gpu+`"]') !== null`)
	if mark := get(t, tab, "read the mark", chromedp.Evaluate[string](`String(window.kiciTestMark)`)); mark != "no reload" {
		t.Errorf("the queue page was reloaded to show the new job (mark %q)", mark)
	}

	pages := []struct{ name, path, ready string }{
		{"runs", "/runs", `#runs tr[data-run="` + ci + `"]`},
		{"run", "/runs/" + ci, `section.job[data-job="test"]`},
		{"queue", "/queue", `a[href="/runs/` + gpu + `"]`},
		{"agents", "/agents", "table.list tbody tr"},
		{"peers", "/peers", "table.list tbody tr"},
	}
	for _, scheme := range []string{"light", "dark"} {
		do(t, tab, "emulate the "+scheme+" colour scheme", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
			})
			return err
		}))
		for _, p := range pages {
			do(t, tab, "open "+p.path, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			data := get(t, tab, "screenshot "+p.path, chromedp.FullScreenshot(100))
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("the screenshot of %s (%s) is not a PNG: %v", p.path, scheme, err)
			}
			colours, lum := imageStats(img)
			if colours < 16 {
				t.Errorf("the screenshot of %s (%s) has %d colours: blank?", p.path, scheme, colours)
			}
			if (scheme == "dark") != (lum < 0.5) {
				t.Errorf("the screenshot of %s (%s) has a mean luminance of %.2f", p.path, scheme, lum)
			}
			name := filepath.Join(dir, fmt.Sprintf("dashboard-%s-%s.png", p.name, scheme))
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %dx%d, %d colours, mean luminance %.2f", name, img.Bounds().Dx(), img.Bounds().Dy(), colours, lum)
		}
	}
}

// imageStats counts the distinct colours of an image and its mean
// luminance (0 black to 1 white), over every other pixel of every other
// row (enough for both, and quick under the race detector).
func imageStats(img image.Image) (colours int, luminance float64) {
	seen := map[[3]uint32]bool{}
	var sum float64
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r, g, bl}] = true
			sum += (0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(bl)) / 0xffff
			n++
		}
	}
	return len(seen), sum / float64(max(n, 1))
}

// TestDashboardLongLogInBrowser: a job prints 100,000 lines while its page
// is open in follow mode. The lines stream in live, the newest stays in
// view, and the page never holds more than a window of them in its DOM.
// Then a link to line 99,990 shows that line marked (in the open page, and
// in a page opened on the link, which holds the log's first lines only); a
// range link marks its lines; a search for a line in a step whose section
// is closed finds it, opens the section, and next/previous move between
// the matches.
func TestDashboardLongLogInBrowser(t *testing.T) {
	t.Parallel()
	o := startOrchestrator(t, "")
	marks := t.TempDir()
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  long:
    steps:
      - {name: first, run: "echo needle-in-a-closed-step; echo needle-twice"}
      - name: rows
        run: |
          touch %[1]s/started
          while [ ! -e %[1]s/gate ]; do sleep 0.1; done
          seq 1 100000 | sed 's/^/row /'
`, marks)})
	startAgent(t, o, "", "long-browser-agent", nil)
	id := o.push(t)
	waitFor(t, 60*time.Second, "the rows step to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
	base := "http://" + o.addr
	tab := newTab(t)
	do(t, tab, "open the login page", chromedp.Navigate(base+"/login"))
	browserLogin(t, tab, o.token)
	do(t, tab, "open the run page", chromedp.Navigate(base+"/runs/"+id), chromedp.WaitVisible(chromedp.ID("follow")))
	waitJS(t, tab, "the event stream open", `document.getElementById("run").dataset.live === "open"`)
	do(t, tab, "turn follow on", chromedp.Click(chromedp.ID("follow")))
	if err := touch(filepath.Join(marks, "gate")); err != nil {
		t.Fatal(err)
	}

	// The setup's 2 lines and the first step's 2 come first: row k is
	// line k+4, and the last is line 100,004.
	const last = 100004
	type state struct {
		Live    string `json:"live"`
		Total   int    `json:"total"`
		InDOM   int    `json:"inDOM"`
		MaxDOM  int    `json:"maxDOM"`
		Last    string `json:"last"`
		InView  bool   `json:"inView"`
		Counted string `json:"counted"`
	}
	// Sample the DOM's size while the lines stream in.
	do(t, tab, "watch the DOM's size", chromedp.Evaluate[chromedp.Void](`window.kiciMaxDOM = 0;
		window.kiciWatch = setInterval(() => { window.kiciMaxDOM = Math.max(window.kiciMaxDOM, document.querySelectorAll("ol.log li").length); }, 50);`))
	read := `(() => {
		const li = document.getElementById("long-L` + fmt.Sprint(last) + `");
		const r = li && li.getBoundingClientRect();
		return {live: document.getElementById("run").dataset.live, total: window.kiciJobs.get("long").total,
			inDOM: document.querySelectorAll("ol.log li").length, maxDOM: window.kiciMaxDOM,
			last: li ? li.querySelector(".t").textContent : "",
			inView: !!r && r.bottom <= window.innerHeight + 1 && r.top >= 0,
			counted: document.querySelector('details.step[data-step="1"] summary .count').textContent};
	})()`
	if r := o.waitRun(t, id, 180*time.Second, "the run to end", ended); r.Status != "success" {
		t.Fatalf("run: %s (%s)", r.Status, r.Error)
	}
	waitJS(t, tab, "the last line streamed in and in view", `(() => { const s = `+read+`; return s.live === "ended" && s.last === "row 100000" && s.inView; })()`)
	st := get(t, tab, "read the page's state", chromedp.Evaluate[state](read))
	if st.Total != last || st.Counted != "100000 lines" {
		t.Errorf("the page counts %d lines (rows step: %q), want %d (100000 lines): a line was lost or shown twice", st.Total, st.Counted, last)
	}
	if st.MaxDOM > 1500 || st.InDOM > 1500 {
		t.Errorf("the page held up to %d lines in its DOM (%d now), want a window (at most 1,500)", st.MaxDOM, st.InDOM)
	}

	// Line 99,990 by link, in the open page.
	target := 99990
	want := fmt.Sprintf("row %d", target-4)
	markedLine := fmt.Sprintf(`(() => { const li = document.getElementById("long-L%d"); return !!li && li.classList.contains("hl") && li.querySelector(".t").textContent === %q; })()`, target, want)
	do(t, tab, "follow off, then the link", chromedp.Click(chromedp.ID("follow")),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = "#long-L%d"`, target)))
	waitJS(t, tab, "line 99,990 shown and marked", markedLine)

	// The same link in a page opened on it: that page holds the log's
	// first lines only, and its script asks for the rest.
	do(t, tab, "open the link to line 99,990", chromedp.Navigate(fmt.Sprintf("%s/runs/%s#long-L%d", base, id, target)), chromedp.Reload())
	waitJS(t, tab, "line 99,990 loaded and marked", markedLine)
	if n := get(t, tab, "count the lines in the page", chromedp.Evaluate[int](`document.querySelectorAll("ol.log li").length`)); n > 1500 {
		t.Errorf("%d lines in the page's DOM, want a window (at most 1,500)", n)
	}
	// A range link marks every line of the range.
	do(t, tab, "open a range link", chromedp.Evaluate[chromedp.Void](`location.hash = "#long-L50000-L50003"`))
	waitJS(t, tab, "lines 50,000 to 50,003 marked", `(() => {
		const hl = [...document.querySelectorAll("li.hl")].map(li => li.id);
		return hl.join(",") === "long-L50000,long-L50001,long-L50002,long-L50003"; })()`)

	// Lines the network does not deliver break nothing: the window shows
	// them loading (no exception in the page), and fetches them once it
	// can.
	blockLines := func(on bool) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			var pats []*network.BlockPattern
			if on {
				pats = append(pats, &network.BlockPattern{URLPattern: "*://*:*/runs/*/jobs/*/lines*", Block: true})
			}
			_, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: pats})
			return err
		})
	}
	do(t, tab, "block the lines route", blockLines(true))
	do(t, tab, "jump to line 20,000", chromedp.Evaluate[chromedp.Void](`location.hash = "#long-L20000"`))
	waitJS(t, tab, "line 20,000 waiting for its text", `(() => { const li = document.getElementById("long-L20000"); return !!li && li.classList.contains("loading"); })()`)
	do(t, tab, "unblock the lines route", blockLines(false))
	waitJS(t, tab, "line 20,000 fetched once the route answers", `(() => {
		const li = document.getElementById("long-L20000"); return !!li && li.querySelector(".t").textContent === "row 19996"; })()`)

	// A search for a line of the first step, whose section starts closed.
	open := get(t, tab, "is the first step open", chromedp.Evaluate[bool](`document.querySelector('details.step[data-step="0"]').open`))
	if open {
		t.Fatal("the first step's section is open already; the search would prove nothing")
	}
	do(t, tab, "search for the needle",
		chromedp.SendKeys(chromedp.CSS(`form.logsearch[data-job="long"] input[name=q]`), "NEEDLE"),
		chromedp.Click(chromedp.CSS(`form.logsearch[data-job="long"] button[type=submit]`)))
	waitJS(t, tab, "the first match shown", `(() => {
		const li = document.querySelector("li.hl"); const d = li && li.closest("details");
		return !!li && li.textContent.includes("needle-in-a-closed-step") && d && d.open; })()`)
	if got := get(t, tab, "read the counter", chromedp.Evaluate[string](`document.querySelector('form.logsearch[data-job="long"] .found').textContent`)); got != "1 of 2" {
		t.Errorf("match counter %q, want 1 of 2", got)
	}
	do(t, tab, "next match", chromedp.Click(chromedp.CSS(`form.logsearch[data-job="long"] .next`)))
	waitJS(t, tab, "the second match shown", `(() => { const li = document.querySelector("li.hl"); return !!li && li.textContent.includes("needle-twice"); })()`)
}
