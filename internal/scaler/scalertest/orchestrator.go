package scalertest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/protocol"
)

// heartbeatInterval is what the orchestrator announces. It is short: an
// agent counts as registered once its first heartbeat arrived, which proves
// it processed registered (an agent stopped before that closes without a
// close frame).
const heartbeatInterval = 500 * time.Millisecond

// orchestrator is the orchestrator's side of the agent protocol, up to the
// registration: it accepts an agent whose token the harness minted for its
// id, answers register with registered, then reads (and ignores) what the
// agent sends until the connection closes, recording how it closed.
type orchestrator struct {
	srv     *httptest.Server
	timeout time.Duration

	mu      sync.Mutex
	tokens  map[string]string // agent id → the token its spawn was given
	agents  map[string]*agentConn
	live    map[*websocket.Conn]bool
	changed chan struct{}
}

// agentConn is an agent's latest registered connection.
type agentConn struct {
	reg *protocol.Register
	// remote is the connection's source, host:port.
	remote string
	// ready is set once a message came after registered.
	ready  bool
	closed bool
	// code is the close code the agent sent, or -1 if the connection ended
	// without a close frame (the agent was killed).
	code int
}

func newOrchestrator(t testing.TB, timeout time.Duration, listenHost string) *orchestrator {
	o := &orchestrator{
		timeout: timeout,
		tokens:  map[string]string{},
		agents:  map[string]*agentConn{},
		live:    map[*websocket.Conn]bool{},
		changed: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", o.serveWS)
	o.srv = httptest.NewUnstartedServer(mux)
	if listenHost != "" {
		l, err := net.Listen("tcp", net.JoinHostPort(listenHost, "0"))
		if err != nil {
			t.Fatalf("scalertest: listen on %s: %v", listenHost, err)
		}
		_ = o.srv.Listener.Close()
		o.srv.Listener = l
	}
	o.srv.Start()
	t.Cleanup(func() {
		o.mu.Lock()
		for c := range o.live {
			_ = c.CloseNow()
		}
		o.mu.Unlock()
		o.srv.Close()
	})
	return o
}

// port is the TCP port the orchestrator listens on.
func (o *orchestrator) port() uint16 { return uint16(o.srv.Listener.Addr().(*net.TCPAddr).Port) }

// url is the ws:// URL agents dial.
func (o *orchestrator) url() string {
	return "ws" + strings.TrimPrefix(o.srv.URL, "http") + "/ws"
}

// allow lets the agent agentID register with token.
func (o *orchestrator) allow(agentID, token string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tokens[agentID] = token
}

func (o *orchestrator) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *orchestrator) serveWS(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	o.mu.Lock()
	known := false
	for _, tok := range o.tokens {
		known = known || tok == token
	}
	o.mu.Unlock()
	if !known {
		http.Error(w, "unknown agent token", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(protocol.MaxMessageBytes)
	o.mu.Lock()
	o.live[c] = true
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.live, c)
		o.mu.Unlock()
	}()
	ctx := r.Context()

	regCtx, cancel := context.WithTimeout(ctx, protocol.RegisterTimeout)
	m, err := read(regCtx, c)
	cancel()
	if err != nil {
		return
	}
	reg, ok := m.(*protocol.Register)
	if !ok {
		_ = c.Close(protocol.CloseUnexpectedMessage, protocol.CloseReason(protocol.CloseUnexpectedMessage))
		return
	}
	o.mu.Lock()
	if want, ok := o.tokens[reg.AgentID]; !ok || !reg.ScalerAgent {
		o.mu.Unlock()
		_ = c.Close(protocol.CloseUnknownScalerAgent, protocol.CloseReason(protocol.CloseUnknownScalerAgent))
		return
	} else if want != token {
		o.mu.Unlock()
		_ = c.Close(protocol.CloseUnauthorized, protocol.CloseReason(protocol.CloseUnauthorized))
		return
	}
	ac := &agentConn{reg: reg, remote: r.RemoteAddr}
	o.agents[reg.AgentID] = ac
	o.notifyLocked()
	o.mu.Unlock()

	answer, err := protocol.Encode(&protocol.Registered{
		AgentID: reg.AgentID, HeartbeatIntervalMS: heartbeatInterval.Milliseconds(), ServerVersion: "scalertest",
	})
	if err == nil {
		err = c.Write(ctx, websocket.MessageText, answer)
	}
	if err == nil {
		go heartbeats(ctx, c)
	}
	for err == nil {
		if _, err = read(ctx, c); err == nil {
			o.mu.Lock()
			if !ac.ready {
				ac.ready = true
				o.notifyLocked()
			}
			o.mu.Unlock()
		}
	}
	o.mu.Lock()
	ac.closed, ac.code = true, int(websocket.CloseStatus(err))
	o.notifyLocked()
	o.mu.Unlock()
}

// heartbeats sends the orchestrator's heartbeats until the connection ends.
func heartbeats(ctx context.Context, c *websocket.Conn) {
	tick := time.NewTicker(heartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			data, err := protocol.Encode(&protocol.Heartbeat{Time: now})
			if err != nil || c.Write(ctx, websocket.MessageText, data) != nil {
				return
			}
		}
	}
}

func read(ctx context.Context, c *websocket.Conn) (protocol.Message, error) {
	_, data, err := c.Read(ctx)
	if err != nil {
		return nil, err
	}
	return protocol.Decode(data)
}

// waitFor blocks until cond (called with o.mu held) holds, or fails the
// test after the harness's timeout.
func (o *orchestrator) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(o.timeout)
	defer timer.Stop()
	for {
		o.mu.Lock()
		ok, ch := cond(), o.changed
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("waited %s for %s", o.timeout, what)
		}
	}
}

// waitRegistered returns the register message of agentID once the agent
// is registered on its side too (it sent a message after registered).
func (o *orchestrator) waitRegistered(t testing.TB, agentID string) *protocol.Register {
	t.Helper()
	var reg *protocol.Register
	o.waitFor(t, "agent "+agentID+" to register", func() bool {
		if ac := o.agents[agentID]; ac != nil && ac.ready {
			reg = ac.reg
		}
		return reg != nil
	})
	return reg
}

// waitClosed returns the close code of agentID's connection once it ended.
func (o *orchestrator) waitClosed(t testing.TB, agentID string) int {
	t.Helper()
	code := 0
	o.waitFor(t, "agent "+agentID+" to close its connection", func() bool {
		ac := o.agents[agentID]
		if ac != nil && ac.closed {
			code = ac.code
		}
		return ac != nil && ac.closed
	})
	return code
}

// registered reports whether agentID ever registered.
func (o *orchestrator) registered(agentID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.agents[agentID] != nil
}
