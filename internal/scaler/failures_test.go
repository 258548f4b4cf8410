package scaler

import (
	"strings"
	"testing"
	"time"
)

// refuseThrice runs three spawns the host refuses, each after the
// deferral of the one before has passed, and returns the manager.
func refuseThrice(t *testing.T, failAfter int) (*Manager, *recordingSink, *testClock) {
	t.Helper()
	b := &recordingBackend{typ: "firecracker", spawnErr: Refused("kernel: /srv/fc/vmlinux: no such file or directory")}
	m, sink, clock := newManager(t, []ScalerConfig{{Name: "fc", Type: "firecracker", MaxAgents: 4, FailJobsAfter: failAfter,
		LabelSets: []LabelSet{{Labels: []string{"linux", "fc"}}}}}, map[string]Backend{"fc": b})
	for i := range 3 {
		res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j" + string(rune('1'+i)), RunID: "r", Labels: []string{"fc"}})
		if res.Action != ActionSpawning {
			t.Fatalf("spawn %d: got %s (%s), want spawning", i+1, res.Action, res.Reason)
		}
		waitFreed(t, sink)
		clock.add(time.Hour) // past any deferral
	}
	clock.add(-time.Hour) // back inside the third deferral
	return m, sink, clock
}

func TestFailJobsAfterConsecutiveRefusals(t *testing.T) {
	t.Parallel()
	m, _, clock := refuseThrice(t, 3)
	res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j9", RunID: "r", Labels: []string{"fc"}})
	if res.Action != ActionFailed || !res.FailJob {
		t.Fatalf("after 3 refusals: got %s fail=%v (%s), want the job failed", res.Action, res.FailJob, res.Reason)
	}
	for _, want := range []string{"failed 3 times in a row", "/srv/fc/vmlinux: no such file", "kici-admin scaler retry fc"} {
		if !strings.Contains(res.Reason, want) {
			t.Errorf("reason %q lacks %q", res.Reason, want)
		}
	}
	// Retry lifts the deferral: the next job gets a spawn again.
	if err := m.Retry("fc"); err != nil {
		t.Fatal(err)
	}
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j10", RunID: "r", Labels: []string{"fc"}}); res.Action != ActionSpawning {
		t.Fatalf("after retry: got %s (%s), want spawning", res.Action, res.Reason)
	}
	if err := m.Retry("nope"); err == nil {
		t.Error("retry of an unknown scaler: got nil, want an error")
	}
	_ = clock
}

func TestFailJobsAfterZeroKeepsJobsWaiting(t *testing.T) {
	t.Parallel()
	m, _, _ := refuseThrice(t, 0)
	res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j9", RunID: "r", Labels: []string{"fc"}})
	if res.Action != ActionSkipped || res.FailJob {
		t.Fatalf("got %s fail=%v, want skipped (deferred) without failing the job", res.Action, res.FailJob)
	}
}

func TestReloadOfAChangedScalerLiftsItsDeferral(t *testing.T) {
	t.Parallel()
	m, _, _ := refuseThrice(t, 3)
	cfg := m.cfg
	cfg.Scalers = []ScalerConfig{{Name: "fc", Type: "firecracker", MaxAgents: 5, FailJobsAfter: 3, LabelSets: []LabelSet{{Labels: []string{"linux", "fc"}}}}}
	if _, err := m.Reload(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if res := m.RequestScale(t.Context(), ScaleRequest{JobID: "j9", RunID: "r", Labels: []string{"fc"}}); res.Action != ActionSpawning {
		t.Fatalf("after a reload changing the scaler: got %s (%s), want spawning", res.Action, res.Reason)
	}
}

func TestRecentFailuresSummarisesTheWindow(t *testing.T) {
	t.Parallel()
	m, sink, clock := refuseThrice(t, 3)
	got := m.RecentFailures(0)["fc"]
	// The clock moved an hour per spawn: only the last one is inside 5 min.
	if got.Bound != 1 || got.Unbound != 0 || got.Backend != "firecracker" || !strings.Contains(got.LastError, "vmlinux") {
		t.Errorf("last 5 minutes: got %+v, want 1 bound firecracker failure naming the kernel", got)
	}
	if all := m.RecentFailures(24 * time.Hour)["fc"]; all.Bound != 3 {
		t.Errorf("last day: got %d bound failures, want 3", all.Bound)
	}
	sink.mu.Lock()
	n := len(sink.failed)
	sink.mu.Unlock()
	if n != 3 {
		t.Errorf("spawn failure metric counted %d, want 3", n)
	}
	_ = clock
}

func TestFailureRingKeepsTheNewest(t *testing.T) {
	t.Parallel()
	var f failures
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range failureRing + 10 {
		f.add(failure{scaler: "s", detail: string(rune('a' + i%26)), at: base.Add(time.Duration(i) * time.Second)})
	}
	if f.n != failureRing {
		t.Fatalf("ring holds %d, want %d", f.n, failureRing)
	}
	newest := f.ring[(f.next-1+failureRing)%failureRing]
	if !newest.at.Equal(base.Add(time.Duration(failureRing+9) * time.Second)) {
		t.Errorf("newest entry at %v, want the last added", newest.at)
	}
}
