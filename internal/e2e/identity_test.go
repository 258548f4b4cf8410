package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
)

// dialRefused connects with token, registers agent id and returns the close
// code the orchestrator ends the connection with, failing the test if a
// registered reply arrives first.
func dialRefused(t *testing.T, o *orchestrator, token, id string, labels []string, inFlight ...protocol.InFlightJob) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	c, _, err := websocket.Dial(ctx, "ws://"+o.addr+"/ws", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	s := &scriptedAgent{t: t, conn: c}
	s.send(&protocol.Register{AgentID: id, Labels: labels, Concurrency: 1, InFlight: inFlight})
	// Forged reports sent right behind the register: none may be applied.
	for _, f := range inFlight {
		_ = c.Write(ctx, websocket.MessageText, mustEncode(t, &protocol.JobStatus{JobID: f.JobID, Seq: 99, Status: "success"}))
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Logf("refused connection ended: %v", err)
			return int(websocket.CloseStatus(err))
		}
		if m, err := protocol.Decode(data); err == nil {
			if _, ok := m.(*protocol.Registered); ok {
				t.Fatalf("agent %q under another token was registered, want it refused", id)
			}
		}
	}
}

func mustEncode(t *testing.T, m protocol.Message) []byte {
	t.Helper()
	data, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// secondToken creates another agent token for the label "flaky".
func secondToken(t *testing.T, o *orchestrator) string {
	t.Helper()
	var tok apiv1.AgentToken
	o.api(t, "POST", "/api/v1/agent-tokens", apiv1.AgentTokenRequest{Labels: []string{"flaky"}}, &tok, http.StatusCreated)
	return tok.Token
}

// TestAgentIDBelongsToItsToken: an agent runs a job; a second agent token
// registers the same agent id, reporting the job in flight and forging its
// success. The registration is refused with 4013, the forgery is not
// applied, the real agent keeps its connection and its job, and the run
// ends with what the real agent reports. Once the real agent disconnects
// holding the job, the id still belongs to its token.
func TestAgentIDBelongsToItsToken(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o, token, id := reconnectDrill(t, dbURL)
		other := secondToken(t, o)
		real, d := startRunning(t, o, token, id, "builder")

		if code := dialRefused(t, o, other, "builder", []string{"flaky"}, protocol.InFlightJob{JobID: d.JobID}); code != protocol.CloseIdentityTaken {
			t.Fatalf("hijacking registration closed with %d, want %d", code, protocol.CloseIdentityTaken)
		}
		if j := job(t, o.run(t, id), "build"); j.Status != "running" || j.AgentID != "builder" {
			t.Fatalf("after the refused hijack: job %s on %q, want running on builder", j.Status, j.AgentID)
		}
		// The real agent's connection still works: its report is applied.
		real.send(&protocol.StepStatus{JobID: d.JobID, Seq: 3, Step: 0, Status: "running"})
		real.next(func(m protocol.Message) bool { a, ok := m.(*protocol.JobAckSeq); return ok && a.Seq == 3 })

		// Disconnected while holding the job: the id is still not free.
		real.conn.Close(websocket.StatusGoingAway, "network blip")
		waitRecovering(t, o, d.JobID)
		if code := dialRefused(t, o, other, "builder", []string{"flaky"}, protocol.InFlightJob{JobID: d.JobID}); code != protocol.CloseIdentityTaken {
			t.Fatalf("hijack during the recovery window closed with %d, want %d", code, protocol.CloseIdentityTaken)
		}

		back := dialScripted(t, o, token, "builder", []string{"flaky"}, protocol.InFlightJob{JobID: d.JobID})
		if len(back.reg.Resume) != 1 || back.reg.Resume[0].JobID != d.JobID {
			t.Fatalf("resume of the real agent: got %+v, want job %s", back.reg.Resume, d.JobID)
		}
		back.send(&protocol.StepStatus{JobID: d.JobID, Seq: 4, Step: 0, Status: "failure", ExitCode: 3})
		back.send(&protocol.JobStatus{JobID: d.JobID, Seq: 5, Status: "failure", Error: "step 0 exited with 3"})
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		if j := job(t, r, "build"); r.Status != "failure" || j.Status != "failure" {
			t.Fatalf("run %s, job %s (%q): want the real agent's failure", r.Status, j.Status, j.Error)
		}
		// No job held any more: the id may now move to another token.
		back.conn.Close(websocket.StatusNormalClosure, "done")
		waitFor(t, 30*time.Second, "builder to disconnect", func() bool {
			var list apiv1.AgentList
			o.api(t, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
			for _, a := range list.Agents {
				if a.ID == "builder" {
					return false
				}
			}
			return true
		})
		dialScripted(t, o, other, "builder", []string{"flaky"})
	})
}

// TestForeignJobMessagesGetNotOwner: an agent with its own id and token
// reports on a job that another agent runs. Each message is answered with
// error not_owner and not acknowledged, nothing is applied, and the
// connection stays open.
func TestForeignJobMessagesGetNotOwner(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o, token, id := reconnectDrill(t, dbURL)
		other := secondToken(t, o)
		real, d := startRunning(t, o, token, id, "owner")

		intruder := dialScripted(t, o, other, "intruder", []string{"flaky"})
		forged := []protocol.Message{
			&protocol.StepStatus{JobID: d.JobID, Seq: 50, Step: 0, Status: "success"},
			&protocol.LogChunk{JobID: d.JobID, Seq: 51, Step: 0, Lines: []protocol.LogLine{{TS: time.Now(), Text: "forged line"}}},
			&protocol.JobStatus{JobID: d.JobID, Seq: 52, Status: "success"},
		}
		for _, m := range forged {
			intruder.send(m)
			got := intruder.next(func(m protocol.Message) bool {
				switch m.(type) {
				case *protocol.Error, *protocol.JobAckSeq:
					return true
				}
				return false
			})
			e, ok := got.(*protocol.Error)
			if !ok || e.Code != protocol.ErrorNotOwner {
				t.Fatalf("forged %s: got %#v, want error %s", m.Type(), got, protocol.ErrorNotOwner)
			}
		}
		r := o.run(t, id)
		j := job(t, r, "build")
		if j.Status != "running" || r.Status != "running" || j.Steps[0].Status == "success" {
			t.Fatalf("after forged reports: run %s, job %s, step %s; want running, running, not success", r.Status, j.Status, j.Steps[0].Status)
		}
		for _, line := range o.logs(t, id, "build") {
			if line == "forged line" {
				t.Fatalf("the forged log line was stored")
			}
		}
		real.send(&protocol.JobStatus{JobID: d.JobID, Seq: 3, Status: "success"})
		if r := o.waitRun(t, id, 30*time.Second, "run to end", ended); r.Status != "success" {
			t.Fatalf("run %s, want success reported by its own agent", r.Status)
		}
	})
}

// TestLateAckOnLiveConnectionIsNotDispatchedAgain: the agent acks after
// the ack deadline (a loaded host). The orchestrator must not hand the job
// to another free agent while the first may be running it: it closes the
// slow connection (4031) and waits for the agent, whose reconnect with
// the job in flight gets the job back. The job is dispatched once.
func TestLateAckOnLiveConnectionIsNotDispatchedAgain(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL, "KICI_DISPATCH_ACK_TIMEOUT_MS=300", "KICI_AGENT_RECOVERY_WINDOW_MS=600000")
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  build:
    runs-on: [flaky]
    steps: [{run: "true"}]
`})
		token := secondToken(t, o)
		id := o.push(t)
		slow := dialScripted(t, o, token, "slow", []string{"flaky"})
		d := slow.nextDispatch()
		// A second free agent that fits the job, ready to take it.
		spare := dialScripted(t, o, token, "spare", []string{"flaky"})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var code int
		for {
			_, _, err := slow.conn.Read(ctx)
			if err != nil {
				code = int(websocket.CloseStatus(err))
				break
			}
		}
		if code != protocol.CloseAckTimeout {
			t.Fatalf("slow agent closed with %d, want %d", code, protocol.CloseAckTimeout)
		}
		waitRecovering(t, o, d.JobID)
		again := dialScripted(t, o, token, "slow", []string{"flaky"}, protocol.InFlightJob{JobID: d.JobID})
		if len(again.reg.Resume) != 1 || again.reg.Resume[0].JobID != d.JobID {
			t.Fatalf("resume: got %+v, want job %s", again.reg.Resume, d.JobID)
		}
		again.send(&protocol.JobAck{JobID: d.JobID, Seq: 1})
		again.send(&protocol.JobStatus{JobID: d.JobID, Seq: 2, Status: "running"})
		again.send(&protocol.JobStatus{JobID: d.JobID, Seq: 3, Status: "success"})
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		if j := job(t, r, "build"); r.Status != "success" || j.AgentID != "slow" {
			t.Fatalf("run %s, job on %q: want success on slow", r.Status, j.AgentID)
		}
		// The spare agent never got the job: after the run ended, a read
		// with a short deadline sees heartbeats at most.
		rctx, rcancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer rcancel()
		for {
			_, data, err := spare.conn.Read(rctx)
			if err != nil {
				break
			}
			if m, err := protocol.Decode(data); err == nil {
				if _, ok := m.(*protocol.JobDispatch); ok {
					t.Fatalf("the spare agent got a dispatch of the job the slow agent held")
				}
			}
		}
	})
}
