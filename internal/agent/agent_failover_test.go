package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/agent"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/workflow"
)

// TestFailoverToTheNextOrchestrator: with two orchestrator URLs the agent
// registers on the first; when that one goes away it registers on the
// second without waiting out a backoff, and a job the second dispatches
// fetches its archive from the second (relative URLs follow the
// connection).
func TestFailoverToTheNextOrchestrator(t *testing.T) {
	t.Parallel()
	f1, f2 := newFakeOrchestrator(t), newFakeOrchestrator(t)
	f1.heartbeat, f2.heartbeat = 50*time.Millisecond, 50*time.Millisecond
	startAgent(t, f1, func(c *agent.Config) {
		c.OrchestratorURL = f1.wsURL() + ", " + f2.wsURL()
		// A backoff this long would fail the test: the switch must not wait.
		c.ReconnectMin, c.ReconnectMax = 30*time.Second, 30*time.Second
	})
	f1.waitFor("the agent on the first orchestrator", func() bool { return f1.conns == 1 })
	// The first goes away: no new connections, the live one cut.
	f1.srv.Listener.Close()
	f1.dropConn()
	f2.waitFor("the agent on the second orchestrator", func() bool { return f2.conns == 1 })
	f2.send(dispatch("fo1", workflow.Step{Run: "cat README"}))
	msgs := f2.jobEnded("fo1")
	if last, ok := msgs[len(msgs)-1].(*protocol.JobStatus); !ok || last.Status != protocol.JobSuccess {
		t.Fatalf("the job after the failover ended %s, want success: %v", summary(msgs), msgs[len(msgs)-1])
	}
	if got := linesOf(msgs, 0); len(got) != 1 || got[0] != "hello from the archive" {
		t.Errorf("step output %q: the archive did not come from the second orchestrator", got)
	}
}

func TestConfigRefusesABadOrchestratorURLInAList(t *testing.T) {
	t.Parallel()
	cfg := agent.Config{OrchestratorURL: "ws://a:4000/ws, http://b:4000/ws", Labels: []string{"x"}}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `"http://b:4000/ws": want a ws:// or wss:// URL`) {
		t.Fatalf("got %v, want an error naming the second URL", err)
	}
}
