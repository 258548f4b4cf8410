package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/cluster/peer"
	"github.com/kici-dev/kici/internal/cluster/worker"
	"github.com/kici-dev/kici/internal/protocol"
)

// AgentStream is an agent's message stream as the coordinator's agent
// endpoint reads and writes it (agentws.MessageConn).
type AgentStream interface {
	Read(ctx context.Context) (websocket.MessageType, []byte, error)
	Write(ctx context.Context, typ websocket.MessageType, p []byte) error
	Close(code websocket.StatusCode, reason string) error
}

// AgentServer serves an agent relayed by a worker (agentws's
// ServeRelayed): it reports the token check to authorized, then serves
// until the stream ends.
type AgentServer func(ctx context.Context, s AgentStream, authorization, client, node string, authorized func(error)) error

// maxBuffered bounds the bytes of relayed messages one worker channel
// may have waiting for their readers: a worker (which may be compromised)
// cannot make the coordinator hold more. A stream that would pass it is
// closed; its agent reconnects and replays.
const maxBuffered = 64 << 20

// relayed is the coordinator's end of one agent stream a worker relays.
type relayed struct {
	id       string
	conn     *peer.Conn
	in       chan []byte
	buffered *atomic.Int64 // the channel's bytes waiting, all streams

	mu     sync.Mutex
	closed bool
	done   chan struct{}
	cause  error
}

func newRelayed(id string, c *peer.Conn, buffered *atomic.Int64) *relayed {
	return &relayed{id: id, conn: c, in: make(chan []byte, worker.RelayBuffer), buffered: buffered, done: make(chan struct{})}
}

// end marks the stream ended for cause, once; it reports whether it did.
func (r *relayed) end(cause error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.closed, r.cause = true, cause
	close(r.done)
	return true
}

func (r *relayed) Read(ctx context.Context) (websocket.MessageType, []byte, error) {
	select {
	case data := <-r.in:
		r.buffered.Add(-int64(len(data)))
		return websocket.MessageText, data, nil
	default:
	}
	select {
	case data := <-r.in:
		r.buffered.Add(-int64(len(data)))
		return websocket.MessageText, data, nil
	case <-r.done:
		return 0, nil, r.cause
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
}

func (r *relayed) Write(ctx context.Context, _ websocket.MessageType, p []byte) error {
	select {
	case <-r.done:
		return r.cause
	default:
	}
	return r.conn.Send(ctx, worker.TypeAgentData, worker.AgentData{Conn: r.id, Data: p})
}

func (r *relayed) Close(code websocket.StatusCode, reason string) error {
	if !r.end(fmt.Errorf("closed here with %d: %s", code, reason)) || r.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayCloseTimeout)
	defer cancel()
	return r.conn.Send(ctx, worker.TypeAgentClose, worker.AgentClose{Conn: r.id, Code: int(code), Reason: reason})
}

// deliver hands a message from the worker to the stream's reader; a
// stream whose reader fell behind is closed, so that the agent
// reconnects and replays.
func (r *relayed) deliver(data []byte) {
	if r.buffered.Add(int64(len(data))) > maxBuffered {
		r.buffered.Add(-int64(len(data)))
		_ = r.Close(websocket.StatusCode(protocol.CloseShuttingDown), "relay overloaded; reconnect")
		return
	}
	select {
	case r.in <- data:
		return
	case <-r.done:
	default:
		_ = r.Close(websocket.StatusCode(protocol.CloseShuttingDown), "relay overloaded; reconnect")
	}
	r.buffered.Add(-int64(len(data))) // not queued
}

// errStreamGone is the cause of a stream whose worker channel ended.
var errStreamGone = errors.New("the worker's channel ended")

// streams are the relayed agent streams of one worker channel.
type streams struct {
	mu       sync.Mutex
	m        map[string]*relayed
	buffered atomic.Int64 // bytes delivered and not read yet (maxBuffered)
}

func (s *streams) add(r *relayed) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.m[r.id]; dup {
		return false
	}
	s.m[r.id] = r
	return true
}

func (s *streams) get(id string) *relayed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

func (s *streams) remove(r *relayed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[r.id] == r {
		delete(s.m, r.id)
	}
}

// endAll ends every stream: their agents are served no more here.
func (s *streams) endAll() {
	s.mu.Lock()
	all := make([]*relayed, 0, len(s.m))
	for _, r := range s.m {
		all = append(all, r)
	}
	s.mu.Unlock()
	for _, r := range all {
		r.end(errStreamGone)
	}
}

// maxStreams bounds the agents one worker relays through one channel.
const maxStreams = 4096

// handleRelay serves one relay frame of the worker channel c; it reports
// whether f was one.
func (h *Hub) handleRelay(ctx context.Context, c *peer.Conn, ss *streams, f peer.Frame) bool {
	switch f.Type {
	case worker.TypeAgentOpen:
		var o worker.AgentOpen
		if err := f.Decode(&o); err != nil || o.Conn == "" || len(o.Conn) > 64 {
			_ = c.Reply(ctx, f, nil, fmt.Errorf("malformed %s", f.Type))
			return true
		}
		if h.cfg.Agents == nil {
			_ = c.Reply(ctx, f, nil, errors.New("this coordinator serves no relayed agents"))
			return true
		}
		r := newRelayed(o.Conn, c, &ss.buffered)
		ss.mu.Lock()
		full := len(ss.m) >= maxStreams
		ss.mu.Unlock()
		if full || !ss.add(r) {
			_ = c.Reply(ctx, f, nil, fmt.Errorf("stream %q refused: a duplicate, or over %d streams", o.Conn, maxStreams))
			return true
		}
		go func() {
			defer ss.remove(r)
			var once sync.Once
			answer := func(err error) {
				once.Do(func() { _ = c.Reply(context.Background(), f, nil, err) })
			}
			err := h.cfg.Agents(context.Background(), r, truncate(o.Authorization, 4096), truncate(o.Client, 255), c.PeerID(), answer)
			answer(err) // a failure before the check was reported
			_ = r.Close(websocket.StatusNormalClosure, "")
		}()
	case worker.TypeAgentData:
		var d worker.AgentData
		if err := f.Decode(&d); err != nil {
			return true
		}
		if r := ss.get(d.Conn); r != nil {
			r.deliver(d.Data)
		}
	case worker.TypeAgentClose:
		var cl worker.AgentClose
		if err := f.Decode(&cl); err != nil {
			return true
		}
		if r := ss.get(cl.Conn); r != nil {
			r.end(fmt.Errorf("the agent's connection to the worker ended (%d %s)", cl.Code, truncate(cl.Reason, 123)))
		}
	default:
		return false
	}
	return true
}
