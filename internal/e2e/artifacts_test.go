package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// commitFile writes name into the repository dir and commits it on main.
func commitFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "add " + name}} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = minimalEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
}

// hasLine reports whether a line of lines contains text.
func hasLine(lines []string, text string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, text) })
}

// TestArtifactsReachTheNextJobAndTheCLI: real orchestrator and agent
// processes. The build job's artifacts (its dist/ tree) are uploaded after
// its steps; the test job, which needs build, finds them in its workspace
// before its steps; `kici-admin runs artifacts` lists them and, with
// --download, extracts them byte for byte.
func TestArtifactsReachTheNextJobAndTheCLI(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {branches: [main]}}
jobs:
  build:
    runs-on: [linux]
    artifacts: {paths: ["dist/**"], expire: 7d}
    steps:
      - run: mkdir -p dist/bin && echo "hello from build" > dist/bin/app.txt && echo "<ok/>" > dist/report.xml && echo scratch > tmp.txt
  test:
    needs: [build]
    runs-on: [linux]
    steps:
      - run: cat dist/bin/app.txt && test -f dist/report.xml && test ! -e tmp.txt
`})
		startAgent(t, o, "", "agent-art", []string{"linux"})
		id := o.push(t)
		r := o.waitRun(t, id, 90*time.Second, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run: got %s (%s), want success\nbuild: %q\ntest: %q", r.Status, r.Error, o.logs(t, id, "build"), o.logs(t, id, "test"))
		}
		if logs := o.logs(t, id, "build"); !hasLine(logs, "[kici] artifacts uploaded: 2 files") {
			t.Errorf("build log: got %q, want the upload noted", logs)
		}
		test := o.logs(t, id, "test")
		if !hasLine(test, "[kici] artifacts of build: 2 files") || !hasLine(test, "hello from build") {
			t.Errorf("test log: got %q, want the artifacts extracted and read", test)
		}

		stdout, stderr, code := kiciAdmin(t, o, o.token, "runs", "artifacts", id)
		if code != 0 || !strings.Contains(stdout, "dist/bin/app.txt") || !strings.Contains(stdout, "dist/report.xml") {
			t.Errorf("runs artifacts: got exit %d, stdout %q, stderr %q, want both files listed", code, stdout, stderr)
		}
		dir := t.TempDir()
		stdout, stderr, code = kiciAdmin(t, o, o.token, "runs", "artifacts", id, "--job", "build", "--download", dir)
		if code != 0 {
			t.Fatalf("runs artifacts --download: exit %d: %s %s", code, stdout, stderr)
		}
		got, err := os.ReadFile(filepath.Join(dir, "build", "dist", "bin", "app.txt"))
		if err != nil || string(got) != "hello from build\n" {
			t.Errorf("downloaded app.txt: got %q, %v, want the file build wrote", got, err)
		}

		// The run's page links build's artifacts (and no artifacts of
		// test, which has none); the link downloads the bundle whose digest
		// the API lists.
		var list apiv1.ArtifactList
		o.api(t, "GET", "/api/v1/runs/"+id+"/artifacts", nil, &list, http.StatusOK)
		if len(list.Artifacts) != 1 {
			t.Fatalf("artifacts of the run: %+v, want build's alone", list.Artifacts)
		}
		b := newBrowser(t, o)
		if p := b.login(o.token); p.status != http.StatusSeeOther {
			t.Fatalf("dashboard login: %d", p.status)
		}
		page := b.get("/runs/" + id)
		link := `href="/runs/` + id + `/jobs/build/artifacts"`
		if !strings.Contains(page.body, link) || strings.Contains(page.body, `/jobs/test/artifacts"`) || !strings.Contains(page.body, "(2 files, ") {
			t.Errorf("the run page does not link build's 2 artifacts (and only those):\n%s", page.body)
		}
		dl := b.get("/runs/" + id + "/jobs/build/artifacts")
		sum := sha256.Sum256([]byte(dl.body))
		if dl.status != http.StatusOK || hex.EncodeToString(sum[:]) != list.Artifacts[0].SHA256 {
			t.Errorf("the page's artifacts link: %d, %d bytes with SHA-256 %x, want 200 and the bundle of digest %s", dl.status, len(dl.body), sum, list.Artifacts[0].SHA256)
		}
	})
}

// keyRE finds a cache key filled with its hashFiles digest.
var keyRE = regexp.MustCompile(`deps-[0-9a-f]{64}`)

// TestCacheMissThenHitAcrossRuns: real orchestrator and agent processes.
// The first run's job misses its cache (its key holds a hashFiles digest
// of a lock file), builds vendor/ and saves it; the second run's job hits
// under the same key and finds vendor/ before its steps. The lookups are
// counted in /metrics.
func TestCacheMissThenHitAcrossRuns(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		dir := o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {branches: [main]}}
jobs:
  build:
    runs-on: [linux]
    cache:
      - key: "deps-${{ hashFiles('deps.lock') }}"
        paths: [vendor]
    steps:
      - run: |
          if [ -f vendor/lib.txt ]; then echo "restored: $(cat vendor/lib.txt)"; else mkdir -p vendor && echo "built in run 1" > vendor/lib.txt; fi
`})
		commitFile(t, dir, "deps.lock", "lib 1.0\n")
		startAgent(t, o, "", "agent-cache", []string{"linux"})
		runOnce := func() []string {
			t.Helper()
			id := o.push(t)
			r := o.waitRun(t, id, 90*time.Second, "run to end", ended)
			logs := o.logs(t, id, "build")
			if r.Status != "success" {
				t.Fatalf("run: got %s (%s), want success\n%q", r.Status, r.Error, logs)
			}
			return logs
		}
		first := runOnce()
		if !hasLine(first, "[kici] cache miss: deps-") || !hasLine(first, "[kici] cache saved: deps-") {
			t.Fatalf("first run: got %q, want a miss and a save", first)
		}
		second := runOnce()
		if !hasLine(second, "[kici] cache hit: deps-") || !hasLine(second, "restored: built in run 1") || hasLine(second, "cache saved") {
			t.Errorf("second run: got %q, want a hit, vendor/ restored, and no save", second)
		}
		k1, k2 := keyRE.FindString(strings.Join(first, "\n")), keyRE.FindString(strings.Join(second, "\n"))
		if k1 == "" || k1 != k2 {
			t.Errorf("keys: got %q then %q, want the same hashFiles key", k1, k2)
		}
		for _, want := range []string{`kici_orch_cache_requests_total{result="miss"} 1`, `kici_orch_cache_requests_total{result="hit"} 1`} {
			if !o.hasMetric(t, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		if v := o.metric(t, "kici_orch_cache_bytes"); v <= 0 {
			t.Errorf("kici_orch_cache_bytes = %v after a save, want > 0", v)
		}
	})
}
