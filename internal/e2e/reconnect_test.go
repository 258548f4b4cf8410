package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
)

// scriptedAgent is one WebSocket connection of an agent whose every move
// the test makes: it speaks the real protocol over a real connection, so
// the test can stop between a dispatch and its ack, which a real agent
// never lets anyone observe.
type scriptedAgent struct {
	t    *testing.T
	conn *websocket.Conn
	reg  *protocol.Registered
}

// dialScripted connects and registers agent id with labels, reporting
// inFlight as the jobs it still holds.
func dialScripted(t *testing.T, o *orchestrator, token, id string, labels []string, inFlight ...protocol.InFlightJob) *scriptedAgent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	c, _, err := websocket.Dial(ctx, "ws://"+o.addr+"/ws", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	s := &scriptedAgent{t: t, conn: c}
	t.Cleanup(func() { c.CloseNow() })
	s.send(&protocol.Register{AgentID: id, Labels: labels, Concurrency: 1, InFlight: inFlight})
	m := s.next(func(m protocol.Message) bool { _, ok := m.(*protocol.Registered); return ok })
	s.reg = m.(*protocol.Registered)
	return s
}

func (s *scriptedAgent) send(m protocol.Message) {
	s.t.Helper()
	data, err := protocol.Encode(m)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), 10*time.Second)
	defer cancel()
	if err := s.conn.Write(ctx, websocket.MessageText, data); err != nil {
		s.t.Fatalf("send %s: %v", m.Type(), err)
	}
}

// next reads messages until one satisfies want, failing the test after
// 30 s or if the connection ends first.
func (s *scriptedAgent) next(want func(protocol.Message) bool) protocol.Message {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	for {
		_, data, err := s.conn.Read(ctx)
		if err != nil {
			s.t.Fatalf("read: %v", err)
		}
		m, err := protocol.Decode(data)
		if err != nil {
			s.t.Fatalf("decode %s: %v", data, err)
		}
		if want(m) {
			return m
		}
	}
}

func (s *scriptedAgent) nextDispatch() *protocol.JobDispatch {
	s.t.Helper()
	return s.next(func(m protocol.Message) bool { _, ok := m.(*protocol.JobDispatch); return ok }).(*protocol.JobDispatch)
}

// reconnectDrill starts an orchestrator whose windows are far longer than
// the test may take, so that anything the test sees happened because of
// the agent's reconnect, not because a deadline passed. It returns the
// orchestrator, an agent token for the label "flaky" and a pushed run.
func reconnectDrill(t *testing.T, dbURL string) (*orchestrator, string, string) {
	o := startOrchestrator(t, dbURL, "KICI_DISPATCH_ACK_TIMEOUT_MS=600000", "KICI_AGENT_RECOVERY_WINDOW_MS=600000")
	o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  build:
    runs-on: [flaky]
    retry: 0 # a lost attempt ends the job here (retry_test.go retries one)
    steps: [{run: "true"}]
`})
	var tok apiv1.AgentToken
	o.api(t, "POST", "/api/v1/agent-tokens", apiv1.AgentTokenRequest{Labels: []string{"flaky"}}, &tok, http.StatusCreated)
	return o, tok.Token, o.push(t)
}

// waitRecovering waits until the orchestrator has seen the agent go and
// the job waits for it to come back.
func waitRecovering(t *testing.T, o *orchestrator, jobID string) {
	t.Helper()
	waitFor(t, 30*time.Second, "job "+jobID+" to wait for its agent", func() bool {
		var q apiv1.Queue
		o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
		for _, e := range q.Jobs {
			if e.JobID == jobID {
				return strings.Contains(e.WhyPending, "to reconnect and reclaim the job")
			}
		}
		return false
	})
}

// startRunning connects agentID, takes the dispatch of run id's job and
// reports it running, and waits until the orchestrator has it running.
func startRunning(t *testing.T, o *orchestrator, token, id, agentID string) (*scriptedAgent, *protocol.JobDispatch) {
	t.Helper()
	a := dialScripted(t, o, token, agentID, []string{"flaky"})
	d := a.nextDispatch()
	a.send(&protocol.JobAck{JobID: d.JobID, Seq: 1})
	a.send(&protocol.JobStatus{JobID: d.JobID, Seq: 2, Status: "running"})
	o.waitRun(t, id, 30*time.Second, "job to run", func(r apiv1.Run) bool { return job(t, r, "build").Status == "running" })
	return a, d
}

// wantLost waits for run id to end and checks that its job failed as lost
// because its agent came back without it.
func wantLost(t *testing.T, o *orchestrator, id string) {
	t.Helper()
	r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
	j := job(t, r, "build")
	if r.Status != "failure" || j.Status != "failure" || !strings.Contains(j.Error, "reconnected without the job it was running") {
		t.Fatalf("run %s, job %s (%q): want failure saying the agent reconnected without the job", r.Status, j.Status, j.Error)
	}
}

// TestUnackedDispatchWaitsForItsAgent: the connection breaks after a
// dispatch reached the agent but before its ack reached the orchestrator.
// The agent may already run the job, so the job waits for it instead of
// going to the queue; the agent reconnects reporting the job in flight,
// gets it back and finishes it; the job is dispatched exactly once. (The
// CI drill that found this had the job dispatched a second time, its step
// run twice.)
func TestUnackedDispatchWaitsForItsAgent(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o, token, id := reconnectDrill(t, dbURL)
		first := dialScripted(t, o, token, "flaky-1", []string{"flaky"})
		d := first.nextDispatch()
		first.conn.Close(websocket.StatusGoingAway, "network blip")
		waitRecovering(t, o, d.JobID)

		again := dialScripted(t, o, token, "flaky-1", []string{"flaky"}, protocol.InFlightJob{JobID: d.JobID})
		if len(again.reg.Resume) != 1 || again.reg.Resume[0].JobID != d.JobID || again.reg.Resume[0].AckSeq != 0 {
			t.Fatalf("resume: got %+v, want job %s with ack_seq 0", again.reg.Resume, d.JobID)
		}
		again.send(&protocol.JobAck{JobID: d.JobID, Seq: 1})
		again.send(&protocol.JobStatus{JobID: d.JobID, Seq: 2, Status: "running"})
		again.send(&protocol.JobStatus{JobID: d.JobID, Seq: 3, Status: "success"})
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		if j := job(t, r, "build"); r.Status != "success" || j.Status != "success" || j.AgentID != "flaky-1" {
			t.Fatalf("run %s, job %s on %q (%q): want success on flaky-1", r.Status, j.Status, j.AgentID, j.Error)
		}
		var q apiv1.Queue
		o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
		if len(q.Jobs) != 0 {
			t.Errorf("queue after the run: %+v, want empty", q.Jobs)
		}
		if d.Attempt != 1 {
			t.Errorf("first dispatch has attempt %d, want 1", d.Attempt)
		}
	})
}

// TestReconnectWithoutUnackedJobRequeuesAtOnce: the agent comes back
// without the job it never acknowledged (the dispatch was lost on the
// way). The job goes back to the queue at once, not after the recovery
// window, and is dispatched again as attempt 2.
func TestReconnectWithoutUnackedJobRequeuesAtOnce(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o, token, _ := reconnectDrill(t, dbURL)
		first := dialScripted(t, o, token, "flaky-2", []string{"flaky"})
		d := first.nextDispatch()
		first.conn.Close(websocket.StatusGoingAway, "network blip")
		waitRecovering(t, o, d.JobID)

		again := dialScripted(t, o, token, "flaky-2", []string{"flaky"})
		if len(again.reg.Resume) != 0 {
			t.Fatalf("resume: got %+v, want none", again.reg.Resume)
		}
		d2 := again.nextDispatch()
		if d2.JobID != d.JobID || d2.Attempt != 2 {
			t.Fatalf("second dispatch: job %s attempt %d, want job %s attempt 2", d2.JobID, d2.Attempt, d.JobID)
		}
	})
}

// TestReconnectWithoutRunningJobFailsAtOnce: the agent had started the
// job, then comes back without it (it restarted). Its steps may have run,
// so the job is not run again: it fails at once as lost, saying why.
func TestReconnectWithoutRunningJobFailsAtOnce(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o, token, id := reconnectDrill(t, dbURL)
		first, d := startRunning(t, o, token, id, "flaky-3")
		first.conn.Close(websocket.StatusGoingAway, "agent restarting")
		waitRecovering(t, o, d.JobID)

		dialScripted(t, o, token, "flaky-3", []string{"flaky"})
		wantLost(t, o, id)
	})
}

// TestReplacedConnectionJobsAreSettled: the agent's host reboots and the
// agent registers again while its old connection still looks open to the
// orchestrator (half-open TCP). The job the old connection was running is
// not reported by the new one, so it fails at once instead of staying
// "running" with nobody to end it; the old connection is closed as
// replaced.
func TestReplacedConnectionJobsAreSettled(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o, token, id := reconnectDrill(t, dbURL)
		old, _ := startRunning(t, o, token, id, "flaky-4")

		dialScripted(t, o, token, "flaky-4", []string{"flaky"})
		wantLost(t, o, id)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		for {
			_, _, err := old.conn.Read(ctx)
			if err == nil {
				continue
			}
			if code := websocket.CloseStatus(err); code != protocol.CloseReplaced {
				t.Fatalf("old connection ended with %v (code %d), want close code %d", err, code, protocol.CloseReplaced)
			}
			break
		}
	})
}
