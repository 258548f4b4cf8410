package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/kici-dev/kici/internal/testsvc"
)

// One Chromium serves the whole test binary, started by the first test
// that needs it and closed by TestMain (closeBrowser); each test gets
// tabs of its own, each in a browser context of its own (fresh cookies:
// every orchestrator of the package listens on 127.0.0.1, and cookies do
// not tell ports apart).
var (
	browserOnce   sync.Once
	browserCtx    context.Context // the browser's chromedp context
	browserErr    error           // why it did not start
	browserOutput syncBuffer      // what Chromium wrote, for a failed start
	browserStop   func()          // cancels the browser's contexts
	browserHome   string          // HOME of the browser, so that it writes nothing in the real one
)

// tabTimeout bounds everything one tab does.
const tabTimeout = 90 * time.Second

// sharedBrowser returns the context of the package's browser, starting it
// on first use.
func sharedBrowser(t *testing.T) context.Context {
	t.Helper()
	path := testsvc.Chromium(t) // skips (or fails) before anything starts
	browserOnce.Do(func() { startBrowser(path) })
	if browserErr != nil {
		t.Fatalf("start Chromium %s: %v\n%s", path, browserErr, browserOutput.String())
	}
	return browserCtx
}

func startBrowser(path string) {
	// Chromium keeps crash reports and settings under HOME (.config,
	// .cache) whatever its profile: give it a home of its own.
	home, err := os.MkdirTemp("", "kici-e2e-chromium-home-")
	if err != nil {
		browserErr = err
		return
	}
	browserHome = home
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.Env("HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache")),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root, where the sandbox cannot start
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("mute-audio", true),
		chromedp.CombinedOutput(&browserOutput),
	)
	// Not the test's context: the browser outlives the test that started it.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	browserStop = func() { cancel(); cancelAlloc() }
	// The first Do starts Chromium and binds it to ctx; a start that hangs
	// is given up after a minute.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		browserErr = err
	case <-time.After(time.Minute):
		browserErr = errors.New("Chromium did not answer within a minute")
	}
	if browserErr != nil {
		browserStop()
		browserStop = nil
		os.RemoveAll(home)
		return
	}
	browserCtx = ctx
}

// closeBrowser closes the package's browser, if a test started one, and
// waits until its processes are gone and its profile is removed.
// TestMain calls it after the tests.
func closeBrowser() {
	if browserStop == nil {
		return
	}
	procs := browserProcesses(chromedp.FromContext(browserCtx).Browser.Process().Pid, browserHome)
	ctx, cancel := context.WithTimeout(browserCtx, 10*time.Second)
	_ = chromedp.Cancel(ctx) // asks Chromium to close; the cancels below kill it if it does not
	cancel()
	browserStop()
	browserStop = nil
	// Chromium's helpers outlive it for a moment, and once they exit the
	// init process reaps them: wait for that, so that no Chromium process
	// (not even a zombie) is left when the tests end.
	deadline := time.Now().Add(10 * time.Second)
	for pid, comm := range procs {
		for processComm(pid) == comm && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	os.RemoveAll(browserHome)
}

// browserProcesses returns the command names of the browser's processes
// by pid: the main one, its descendants, and the crash handlers, which
// Chromium detaches but which name the browser's home.
func browserProcesses(mainPID int, home string) map[int]string {
	type proc struct {
		ppid    int
		comm    string
		cmdline []byte
	}
	all := map[int]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(string(stat[end+1:])) // state ppid ...
		if len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		all[pid] = proc{ppid: ppid, comm: string(stat[open+1 : end]), cmdline: cmdline}
	}
	out := map[int]string{}
	if p, ok := all[mainPID]; ok {
		out[mainPID] = p.comm
	}
	for grew := true; grew; {
		grew = false
		for pid, p := range all {
			if _, ok := out[pid]; ok {
				continue
			}
			if _, parent := out[p.ppid]; parent || (home != "" && bytes.Contains(p.cmdline, []byte(home))) {
				out[pid] = p.comm
				grew = true
			}
		}
	}
	return out
}

// processComm returns the command name of a process, "" if there is none
// (a zombie keeps its name until it is reaped).
func processComm(pid int) string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return ""
	}
	return string(stat[open+1 : end])
}

// newTab opens a tab in a fresh browser context (no cookies) of the shared
// browser, for at most tabTimeout; the test ends it. The test fails if
// the page opens a JavaScript dialog (an injected alert() that ran) or
// logs an error to the console: an uncaught exception, console.error, or
// an error of the browser itself, such as a Content-Security-Policy
// violation or a failed request.
func newTab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancelTimeout := context.WithTimeout(sharedBrowser(t), tabTimeout)
	tab, cancelTab := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancelTab() // closes the tab and disposes of its browser context
		cancelTimeout()
		wg.Wait() // the watchers below report within the test
	})

	// Console and Events open the tab; they subscribe before any page loads.
	messages := chromedp.Console(tab)
	dialogs := chromedp.Events(tab, cdppage.JavascriptDialogOpening)
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// The browser asks every site for /favicon.ico, which the
			// dashboard does not serve: not an error of its pages.
			if m.Source == "network" && strings.HasSuffix(m.URL, "/favicon.ico") {
				continue
			}
			// Other tests of the binary make and remove network interfaces
			// (Docker networks, namespaces, TAPs); Chromium aborts the
			// requests in flight when it sees one change. The page must
			// recover (its script retries, and the tests check what it
			// shows), but the aborted request is not its error.
			if m.Source == "network" && strings.Contains(m.Text, "net::ERR_NETWORK_CHANGED") {
				continue
			}
			// A request a test blocks on purpose (network.SetBlockedURLs),
			// to see the page cope with lost answers.
			if m.Source == "network" && strings.Contains(m.Text, "net::ERR_BLOCKED_BY_CLIENT") {
				continue
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				where := m.URL
				if where != "" {
					where = fmt.Sprintf(" (%s:%d)", m.URL, m.Line+1)
				}
				t.Errorf("browser console %s%s", m, where)
			}
		}
	})
	wg.Go(func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			t.Errorf("the page opened a JavaScript %s dialog: %q", ev.Type, ev.Message)
			// A dialog blocks the page; dismiss it so that the test goes on
			// (and fails) instead of hanging.
			_, _ = chromedp.Call(tab, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: false})
		}
	})
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return tab
}
