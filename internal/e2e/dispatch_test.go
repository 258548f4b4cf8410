package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/protocol"
)

// silentAgent speaks the real protocol but never acknowledges a dispatch,
// as an agent that hung would. It reconnects whenever it is disconnected
// and counts the dispatches it received and the close codes it got.
type silentAgent struct {
	mu         sync.Mutex
	dispatches int
	closes     []int
}

func (s *silentAgent) run(ctx context.Context, t *testing.T, url, token string) {
	for ctx.Err() == nil {
		hdr := http.Header{"Authorization": {"Bearer " + token}}
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		reg, _ := protocol.Encode(&protocol.Register{AgentID: "silent", Labels: []string{"silent"}, Concurrency: 1})
		if err := c.Write(ctx, websocket.MessageText, reg); err != nil {
			continue
		}
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) {
					s.mu.Lock()
					s.closes = append(s.closes, int(ce.Code))
					s.mu.Unlock()
				}
				break
			}
			if m, err := protocol.Decode(data); err == nil {
				if _, ok := m.(*protocol.JobDispatch); ok {
					s.mu.Lock()
					s.dispatches++
					s.mu.Unlock()
				}
			}
		}
	}
}

// TestUnackedDispatchIsRequeuedThenFails: a dispatch that is never
// acknowledged goes back to the queue after the ack timeout, the silent
// agent is disconnected with close code 4031, and the fifth requeue fails
// the job for good.
func TestUnackedDispatchIsRequeuedThenFails(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL, "KICI_DISPATCH_ACK_TIMEOUT_MS=200")
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  stuck:
    runs-on: [silent]
    retry: 0 # exhausted dispatches end the job here, not a retry
    steps: [{run: "true"}]
`})
		var tok apiv1.AgentToken
		o.api(t, "POST", "/api/v1/agent-tokens", apiv1.AgentTokenRequest{Labels: []string{"silent"}}, &tok, http.StatusCreated)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s := &silentAgent{}
		go s.run(ctx, t, "ws://"+o.addr+"/ws", tok.Token)
		id := o.push(t)
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		j := job(t, r, "stuck")
		if r.Status != "failure" || !strings.Contains(j.Error, "dispatch attempts exhausted") {
			t.Fatalf("run %s, job %s (%q): want failure with dispatch attempts exhausted", r.Status, j.Status, j.Error)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.dispatches != 5 {
			t.Errorf("the silent agent got %d dispatches, want 5", s.dispatches)
		}
		saw4031 := false
		for _, c := range s.closes {
			saw4031 = saw4031 || c == protocol.CloseAckTimeout
		}
		if !saw4031 {
			t.Errorf("close codes %v, want %d (ack timeout) among them", s.closes, protocol.CloseAckTimeout)
		}
	})
}

// TestQueueTimeoutFailsJobSaysWhy: a job no agent can take waits with a
// why_pending that names its labels, then fails after the queue timeout.
func TestQueueTimeoutFailsJobSaysWhy(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL, "KICI_QUEUE_TIMEOUT_MS=1500", "KICI_QUEUE_SWEEP_INTERVAL_MS=100")
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  gpu:
    runs-on: [gpu]
    steps: [{run: "true"}]
`})
		startAgent(t, o, "", "cpu-only", []string{"cpu"})
		id := o.push(t)
		var q apiv1.Queue
		o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
		if len(q.Jobs) != 1 || !strings.Contains(q.Jobs[0].WhyPending, "no connected agent has all of the labels [gpu]") {
			t.Errorf("queue: got %+v, want one job waiting because no agent has [gpu]", q.Jobs)
		}
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		if j := job(t, r, "gpu"); j.Status != "failure" || !strings.Contains(j.Error, "queue timeout") {
			t.Fatalf("job: got %s (%q), want failure with queue timeout", j.Status, j.Error)
		}
		o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
		if len(q.Jobs) != 0 {
			t.Errorf("queue after the timeout: got %d jobs, want 0", len(q.Jobs))
		}
	})
}
