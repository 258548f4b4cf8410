package worker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/cluster/peer"
	"github.com/kici-dev/kici/internal/protocol"
)

// openTimeout bounds a coordinator's answer to an agent.open.
const openTimeout = 15 * time.Second

// session is the worker's side of one coordinator channel, with the
// agent streams relayed over it.
type session struct {
	base string
	conn *peer.Conn

	mu     sync.Mutex
	agents map[string]*agentStream
	// scalerSem bounds the scaler requests served at once.
	scalerSem chan struct{}
}

// maxScalerRequests is how many scaler requests of one coordinator a
// worker serves at once.
const maxScalerRequests = 16

// agentStream is one agent's WebSocket relayed over a session.
type agentStream struct {
	id  string
	out chan []byte // messages from the coordinator, for the writer

	mu     sync.Mutex
	ws     *websocket.Conn // once upgraded
	closed bool
	code   websocket.StatusCode
	reason string
	done   chan struct{}
}

// close ends the stream, once, closing the agent's WebSocket with code
// (at once, or as soon as it is upgraded).
func (a *agentStream) close(code websocket.StatusCode, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed, a.code, a.reason = true, code, reason
	close(a.done)
	if a.ws != nil {
		go a.ws.Close(code, reason)
	}
}

// upgraded records the agent's WebSocket; false if the stream was closed
// meanwhile (the WebSocket is then closed with the stream's code).
func (a *agentStream) upgraded(ws *websocket.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		go ws.Close(a.code, a.reason)
		return false
	}
	a.ws = ws
	return true
}

// deliver hands a coordinator's message to the agent's writer; an agent
// that does not keep up is disconnected, to reconnect and replay.
func (a *agentStream) deliver(data []byte) {
	select {
	case a.out <- data:
	case <-a.done:
	default:
		a.close(websocket.StatusCode(protocol.CloseShuttingDown), "relay overloaded; reconnect")
	}
}

func (s *session) stream(id string) *agentStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agents[id]
}

// handle serves a relay frame from the coordinator.
func (s *session) handle(f peer.Frame) bool {
	switch f.Type {
	case TypeAgentData:
		var d AgentData
		if f.Decode(&d) == nil {
			if a := s.stream(d.Conn); a != nil {
				a.deliver(d.Data)
			}
		}
	case TypeAgentClose:
		var c AgentClose
		if f.Decode(&c) == nil {
			if a := s.stream(c.Conn); a != nil {
				a.close(websocket.StatusCode(c.Code), c.Reason)
			}
		}
	default:
		return false
	}
	return true
}

// end disconnects every agent relayed over the session: they reconnect
// to the worker, which relays them to a coordinator it still reaches.
func (s *session) end() {
	s.mu.Lock()
	all := make([]*agentStream, 0, len(s.agents))
	for _, a := range s.agents {
		all = append(all, a)
	}
	s.mu.Unlock()
	for _, a := range all {
		a.close(websocket.StatusCode(protocol.CloseShuttingDown), "the worker lost its coordinator; reconnect")
	}
}

// pick returns a session to relay through: the first coordinator of the
// configuration the worker is connected to.
func (w *Worker) pick() *session {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, base := range w.cfg.CoordinatorURLs {
		if s := w.sessions[base]; s != nil {
			return s
		}
	}
	return nil
}

// ServeAgent serves an agent's /ws on the worker: it asks a coordinator
// to take the agent (which checks its token), then relays the agent's
// messages both ways until either side ends.
func (w *Worker) ServeAgent(rw http.ResponseWriter, r *http.Request) {
	s := w.pick()
	if s == nil {
		http.Error(rw, "this worker reaches no coordinator now; retry", http.StatusServiceUnavailable)
		return
	}
	a := &agentStream{id: newStreamID(), out: make(chan []byte, relayBuffer), done: make(chan struct{})}
	s.mu.Lock()
	s.agents[a.id] = a
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.agents, a.id)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(r.Context(), openTimeout)
	_, err := s.conn.Request(ctx, TypeAgentOpen, AgentOpen{Conn: a.id, Authorization: r.Header.Get("Authorization"), Client: r.RemoteAddr})
	cancel()
	var remote *peer.RemoteError
	switch {
	case errors.As(err, &remote) && strings.Contains(remote.Message, "agent token"):
		http.Error(rw, remote.Message, http.StatusUnauthorized)
		return
	case err != nil:
		w.log.Warn("coordinator did not take a relayed agent", "coordinator", s.base, "error", err)
		http.Error(rw, "the coordinator did not take the agent; retry", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(rw, r, nil)
	if err != nil {
		a.close(websocket.StatusNormalClosure, "")
		_ = s.conn.Send(context.Background(), TypeAgentClose, AgentClose{Conn: a.id, Code: int(websocket.StatusProtocolError), Reason: "upgrade failed"})
		return
	}
	ws.SetReadLimit(protocol.MaxMessageBytes)
	if !a.upgraded(ws) {
		return
	}
	go func() { // coordinator → agent
		for {
			select {
			case data := <-a.out:
				wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := ws.Write(wctx, websocket.MessageText, data)
				cancel()
				if err != nil {
					a.close(websocket.StatusGoingAway, "")
					return
				}
			case <-a.done:
				return
			}
		}
	}()
	for { // agent → coordinator
		_, data, err := ws.Read(context.Background())
		if err != nil {
			code := websocket.CloseStatus(err)
			if code == -1 {
				code = websocket.StatusGoingAway
			}
			a.close(code, "")
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.conn.Send(sctx, TypeAgentClose, AgentClose{Conn: a.id, Code: int(code)})
			cancel()
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.conn.Send(sctx, TypeAgentData, AgentData{Conn: a.id, Data: data})
		cancel()
		if err != nil {
			a.close(websocket.StatusCode(protocol.CloseShuttingDown), "the worker lost its coordinator; reconnect")
			return
		}
	}
}

// ServeArchive passes a job's source archive request to a coordinator:
// an agent behind the worker resolves its archive URL against the
// worker's. The job token in the request authenticates it there.
func (w *Worker) ServeArchive(rw http.ResponseWriter, r *http.Request) {
	s := w.pick()
	if s == nil {
		http.Error(rw, "this worker reaches no coordinator now; retry", http.StatusServiceUnavailable)
		return
	}
	target, err := url.Parse(strings.TrimRight(s.base, "/"))
	if err != nil {
		http.Error(rw, "bad coordinator URL", http.StatusInternalServerError)
		return
	}
	httputil.NewSingleHostReverseProxy(target).ServeHTTP(rw, r)
}
