package scalertest

import (
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// Orchestrator is the harness's small orchestrator, for benchmarks that
// drive a backend by hand: it accepts the agents it was told of and says
// when each registered.
type Orchestrator struct{ o *orchestrator }

// NewOrchestrator starts one on listenHost ("" means 127.0.0.1); it stops
// when tb ends.
func NewOrchestrator(tb testing.TB, listenHost string, timeout time.Duration) *Orchestrator {
	return &Orchestrator{o: newOrchestrator(tb, timeout, listenHost)}
}

// Port is the TCP port it listens on.
func (o *Orchestrator) Port() uint16 { return o.o.port() }

// Request builds a SpawnRequest as the manager does, for an agent this
// orchestrator accepts.
func (o *Orchestrator) Request(b scaler.Backend, ls scaler.LabelSet) scaler.SpawnRequest {
	id := "scaler-" + b.Type() + "-" + randomHex(4)
	token := scaler.TokenPrefix + randomHex(16)
	o.o.allow(id, token)
	return scaler.SpawnRequest{
		AgentID: id, Scaler: scalerName, LabelSet: ls, Limits: ls.Limits,
		Env: map[string]string{
			"KICI_ORCHESTRATOR_URL": o.o.url(), "KICI_AGENT_ID": id, "KICI_AGENT_TOKEN": token,
			"KICI_LABELS": strings.Join(ls.Labels, ","), "KICI_AGENT_ONE_SHOT": "1", "KICI_AGENT_SCALER": "1",
		},
		OnEvent: func(scaler.Event) {},
	}
}

// WaitRegistered waits until the agent's register message arrived (the
// moment a real orchestrator would dispatch to it).
func (o *Orchestrator) WaitRegistered(tb testing.TB, agentID string) {
	tb.Helper()
	o.o.waitFor(tb, "agent "+agentID+" to register", func() bool { return o.o.agents[agentID] != nil })
}

// RemoteAddr is the source (host:port) of the agent's latest registered
// connection, or "".
func (o *Orchestrator) RemoteAddr(agentID string) string {
	o.o.mu.Lock()
	defer o.o.mu.Unlock()
	if ac := o.o.agents[agentID]; ac != nil {
		return ac.remote
	}
	return ""
}
