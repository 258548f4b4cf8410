package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

const everyMinuteWorkflow = `
name: every-minute
on:
  schedule:
    - cron: "* * * * *"
jobs:
  tick:
    runs-on: [linux]
    steps:
      - run: echo "tick of $KICI_EVENT_KIND"
`

// TestScheduleStartsOneRunPerTickOnTwoCoordinators runs two coordinators
// on one PostgreSQL database for two minute ticks of a "* * * * *"
// schedule: each tick starts exactly one run, which an agent of the first
// coordinator runs at the default branch head, whichever coordinator
// created it; the other coordinator's attempt finds the tick taken.
func TestScheduleStartsOneRunPerTickOnTwoCoordinators(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_SCHEDULE_REFRESH_MS=1000"}
	a := startOrchestrator(t, dbURL, cluster...)
	a.addRepo(t, map[string]string{"minute.yml": everyMinuteWorkflow})
	b := startOrchestrator(t, dbURL, cluster...)
	startAgent(t, a, "", "sched-agent", []string{"linux"})

	// Both have read the schedule (b at its start or its next refresh).
	for _, o := range []*orchestrator{a, b} {
		waitFor(t, 20*time.Second, "the schedule listed", func() bool {
			var l apiv1.ScheduleList
			o.api(t, "GET", "/api/v1/schedules", nil, &l, http.StatusOK)
			return len(l.Schedules) == 1 && l.Schedules[0].Workflow == "every-minute" && l.Schedules[0].NextTick != nil
		})
	}
	first := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	second := first.Add(time.Minute)
	// The ticks are the wall clock's: wait for the second one, then for
	// its run (or a duplicate) to be created.
	waitFor(t, time.Until(second)+90*time.Second, "runs of both ticks", func() bool {
		ticks := scheduledTicks(t, a)
		return ticks[first] > 0 && ticks[second] > 0
	})
	waitFor(t, 10*time.Second, "both coordinators to log the second tick", func() bool {
		return strings.Count(a.output.String()+b.output.String(), "tick="+second.Format(time.RFC3339)) >= 2
	})
	ticks := scheduledTicks(t, a)
	for tick, n := range ticks {
		if n != 1 {
			t.Errorf("tick %s started %d runs, want exactly 1", tick.Format(time.RFC3339), n)
		}
	}
	// Each tick was tried by both: one started the run, the other found
	// the tick taken.
	for _, tick := range []time.Time{first, second} {
		at := "tick=" + tick.Format(time.RFC3339)
		started, taken := 0, 0
		for _, o := range []*orchestrator{a, b} {
			for _, line := range strings.Split(o.output.String(), "\n") {
				switch {
				case strings.Contains(line, at) && strings.Contains(line, "scheduled run started"):
					started++
				case strings.Contains(line, at) && strings.Contains(line, "schedule tick already started elsewhere"):
					taken++
				}
			}
		}
		if started != 1 || taken != 1 {
			t.Errorf("tick %s: %d coordinators started its run and %d found it taken, want 1 and 1", tick.Format(time.RFC3339), started, taken)
		}
	}
	// The runs ran at the head, as schedule events, on a's agent; both
	// coordinators list the second tick as the last run.
	var runs apiv1.RunList
	a.api(t, "GET", "/api/v1/runs?source=repo", nil, &runs, http.StatusOK)
	for _, r := range runs.Runs {
		r = a.waitRun(t, r.ID, 60*time.Second, "scheduled run to end", ended)
		if r.Status != "success" {
			t.Errorf("run %s: status %s (%s), want success", r.ID, r.Status, r.Error)
		}
		if got := a.logs(t, r.ID, "tick"); !containsLine(got, "tick of schedule") {
			t.Errorf("run %s log: got %q, want the line %q", r.ID, got, "tick of schedule")
		}
	}
	for _, o := range []*orchestrator{a, b} {
		var l apiv1.ScheduleList
		o.api(t, "GET", "/api/v1/schedules", nil, &l, http.StatusOK)
		if len(l.Schedules) != 1 || l.Schedules[0].LastRun == nil || l.Schedules[0].LastRun.Tick.Before(second) {
			t.Errorf("%s: schedules %+v, want the last run at %s or later", o.addr, l.Schedules, second.Format(time.RFC3339))
		}
	}
}

// scheduledTicks counts the runs of source repo per schedule tick.
func scheduledTicks(t *testing.T, o *orchestrator) map[time.Time]int {
	t.Helper()
	var runs apiv1.RunList
	o.api(t, "GET", "/api/v1/runs?source=repo&limit=1000", nil, &runs, http.StatusOK)
	ticks := map[time.Time]int{}
	for _, r := range runs.Runs {
		var ev struct {
			Kind string    `json:"kind"`
			Tick time.Time `json:"tick"`
		}
		if err := json.Unmarshal(r.Event, &ev); err != nil {
			t.Fatalf("run %s event: %v", r.ID, err)
		}
		if ev.Kind != "schedule" || ev.Tick.IsZero() {
			t.Fatalf("run %s: event %s, want a schedule event with its tick", r.ID, r.Event)
		}
		ticks[ev.Tick]++
	}
	return ticks
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

// metricValue is the value of an unlabelled sample on o's /metrics, or
// -1 when o does not answer or lacks it.
func (o *orchestrator) metricValue(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + o.addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestCoordinatorsElectOneLeader: of two coordinators on one database
// exactly one runs the singleton duties; when it is killed (no release of
// its lease) the other takes over within the lease's TTL and a renewal.
func TestCoordinatorsElectOneLeader(t *testing.T) {
	t.Parallel()
	dbURL := testsvc.PostgresURL(t)
	cluster := []string{"KICI_CLUSTER_ROLE=coordinator", "KICI_CLUSTER_LEASE_TTL_MS=2000", "KICI_CLUSTER_LEASE_RENEW_MS=200",
		"KICI_INSTANCE_HEARTBEAT_MS=200"}
	a := startOrchestrator(t, dbURL, cluster...)
	b := startOrchestrator(t, dbURL, cluster...)
	var lead, other *orchestrator
	waitFor(t, 10*time.Second, "one leader", func() bool {
		la, lb := a.metricValue(t, "kici_orch_cluster_leader"), b.metricValue(t, "kici_orch_cluster_leader")
		if la == 1 && lb == 1 {
			t.Fatal("both coordinators lead")
		}
		switch {
		case la == 1 && lb == 0:
			lead, other = a, b
		case lb == 1 && la == 0:
			lead, other = b, a
		}
		return lead != nil
	})
	peers := func(o *orchestrator) apiv1.PeerList {
		var pl apiv1.PeerList
		o.api(t, "GET", "/api/v1/peers", nil, &pl, http.StatusOK)
		return pl
	}
	pa, pb := peers(a), peers(b)
	if pa.Self == pb.Self || pa.Leader != pb.Leader || pa.Leader != peers(lead).Self {
		t.Fatalf("peer lists disagree on self or leader: %+v / %+v", pa, pb)
	}
	for _, pl := range []apiv1.PeerList{pa, pb} {
		if len(pl.Peers) != 2 || !pl.Peers[0].Connected || !pl.Peers[1].Connected || pl.Peers[0].Address == "" {
			t.Fatalf("peer list %+v: want both coordinators, connected, with their addresses", pl)
		}
	}
	deadID := peers(lead).Self
	lead.kill()
	killed := time.Now()
	waitFor(t, 10*time.Second, "the other coordinator to lead", func() bool {
		return other.metricValue(t, "kici_orch_cluster_leader") == 1
	})
	took := time.Since(killed)
	t.Logf("the surviving coordinator leads %s after the leader was killed (TTL 2 s, renew 200 ms)", took)
	if !strings.Contains(other.output.String(), "leader lease taken") {
		t.Errorf("the new leader did not log taking the lease")
	}
	waitFor(t, 10*time.Second, "the killed coordinator to show as gone", func() bool {
		pl := peers(other)
		for _, p := range pl.Peers {
			if p.ID == deadID {
				return !p.Connected && pl.Leader == pl.Self
			}
		}
		return false
	})
	// Gone, but seen seconds ago: not forgotten yet; nor is the survivor
	// itself; an unknown id is not found.
	other.api(t, "DELETE", "/api/v1/peers/"+deadID, nil, nil, http.StatusConflict)
	other.api(t, "DELETE", "/api/v1/peers/"+peers(other).Self, nil, nil, http.StatusConflict)
	other.api(t, "DELETE", "/api/v1/peers/no-such-peer", nil, nil, http.StatusNotFound)
}
