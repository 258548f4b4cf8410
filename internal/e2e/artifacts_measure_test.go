package e2e

import (
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// measureStorage turns on TestMeasureArtifactsAndCaches, a measurement
// for docs/benchmarks.md, not a check: go test ./internal/e2e/ -run
// TestMeasureArtifactsAndCaches -measure-storage -v.
var measureStorage = flag.Bool("measure-storage", false, "measure artifact upload and download and cache save and restore of 100 MiB")

// jobLevelLines reads the job-level lines (step -1) of a job, with their
// times.
func (o *orchestrator) jobLevelLines(t *testing.T, runID, job string) []apiv1.LogLine {
	t.Helper()
	var out []apiv1.LogLine
	cursor := ""
	for range 1000 {
		var page apiv1.LogPage
		o.api(t, "GET", fmt.Sprintf("/api/v1/runs/%s/jobs/%s/logs?step=-1&cursor=%s", runID, job, cursor), nil, &page, http.StatusOK)
		out = append(out, page.Lines...)
		if page.Done || (len(page.Lines) == 0 && page.Next == cursor) {
			return out
		}
		cursor = page.Next
	}
	t.Fatalf("logs of %s did not end", job)
	return nil
}

// gap returns the time from the line before the first line containing
// text (or from the line containing from, when not "") to that line.
func gap(t *testing.T, lines []apiv1.LogLine, from, text string) time.Duration {
	t.Helper()
	i := slices.IndexFunc(lines, func(l apiv1.LogLine) bool { return strings.Contains(l.Text, text) })
	if i < 1 {
		t.Fatalf("no line %q after another in %v", text, lines)
	}
	start := lines[i-1].TS
	if from != "" {
		j := slices.IndexFunc(lines, func(l apiv1.LogLine) bool { return strings.Contains(l.Text, from) })
		if j < 0 {
			t.Fatalf("no line %q", from)
		}
		start = lines[j].TS
	}
	return lines[i].TS.Sub(start)
}

// TestMeasureArtifactsAndCaches runs, on one host, an orchestrator
// (SQLite) and an agent through four runs of a workflow whose first job
// writes 100 MB of random bytes as artifacts and keeps another 100 MB in
// a cache, and whose second job needs the first. It logs, from the jobs'
// own log lines, the time to upload the artifacts, to fetch and extract
// them in the next job, to save the cache (first run) and to restore it
// (the later runs), with the throughput. It asserts no time.
func TestMeasureArtifactsAndCaches(t *testing.T) {
	if !*measureStorage {
		t.Skip("a measurement: run with -measure-storage")
	}
	const mb = 100
	o := startOrchestrator(t, "")
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {branches: [main]}}
jobs:
  produce:
    runs-on: [linux]
    artifacts: {paths: ["out/**"]}
    cache:
      - {key: bench-cache, paths: [cachedir]}
    steps:
      - run: |
          mkdir -p out cachedir
          test -f cachedir/data.bin || head -c %[1]dM /dev/urandom > cachedir/data.bin
          head -c %[1]dM /dev/urandom > out/data.bin
  consume:
    needs: [produce]
    runs-on: [linux]
    steps:
      - run: test "$(stat -c %%s out/data.bin)" = %[2]d
`, mb, mb<<20)})
	startAgent(t, o, "", "agent-bench", []string{"linux"})
	rate := func(d time.Duration) string {
		return fmt.Sprintf("%s (%.0f MiB/s)", d.Round(time.Millisecond), float64(mb)/d.Seconds())
	}
	var restores []time.Duration
	for i := range 4 {
		id := o.push(t)
		r := o.waitRun(t, id, 5*time.Minute, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run %d: %s (%s)", i, r.Status, r.Error)
		}
		produce, consume := o.jobLevelLines(t, id, "produce"), o.jobLevelLines(t, id, "consume")
		upload := gap(t, produce, "artifacts: uploading", "artifacts uploaded")
		fetch := gap(t, consume, "", "artifacts of produce")
		var bundled time.Duration
		if st := job(t, r, "produce").Steps; len(st) > 0 && st[len(st)-1].FinishedAt != nil {
			k := slices.IndexFunc(produce, func(l apiv1.LogLine) bool { return strings.Contains(l.Text, "artifacts: uploading") })
			bundled = produce[k].TS.Sub(*st[len(st)-1].FinishedAt)
		}
		t.Logf("run %d: artifacts collected and bundled %s, uploaded %s; fetched, verified and extracted in the next job %s",
			i+1, rate(bundled), rate(upload), rate(fetch))
		if i == 0 {
			save := gap(t, produce, "artifacts uploaded", "cache saved")
			t.Logf("run 1: cache bundle and save %s", rate(save))
			continue
		}
		restore := gap(t, produce, "", "cache hit")
		restores = append(restores, restore)
		t.Logf("run %d: cache lookup, fetch, verify and extract %s", i+1, rate(restore))
	}
	slices.Sort(restores)
	t.Logf("cache restore of %d MiB: median %s", mb, rate(restores[len(restores)/2]))
}
