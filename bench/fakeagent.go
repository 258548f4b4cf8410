package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/kici-dev/kici/internal/protocol"
)

// fakeAgent is an agent inside this process that speaks internal/protocol
// over a real WebSocket but runs nothing: it acks each dispatch, then
// reports the job running, each step running and successful, one job-level
// log line, and the job successful — the messages a real agent sends for a
// trivial job, without the checkout and the step process. It notes when
// each job.dispatch frame was read off the socket.
//
// With hold set, it acks a dispatch and hands it to the caller on held;
// the job finishes when the caller calls finish. Without hold it finishes
// each job at once. Concurrency is 1, like a default kici-agent.
type fakeAgent struct {
	id   string
	ws   *websocket.Conn
	hold bool
	held chan dispatched

	mu   sync.Mutex
	busy []string
	err  error

	cancel context.CancelFunc
	done   chan struct{}
}

// dispatched is a job.dispatch, when its frame was read, and the agent
// that read it.
type dispatched struct {
	msg   *protocol.JobDispatch
	at    time.Time
	agent *fakeAgent
}

func dialFakeAgent(ctx context.Context, addr, token, id string, hold bool) (*fakeAgent, error) {
	var held chan dispatched
	if hold {
		held = make(chan dispatched, 16)
	}
	return dialFakeAgentTo(ctx, addr, token, id, held)
}

// dialFakeAgentTo connects an agent that holds each dispatch and hands it
// to held, which many agents may share; a nil held finishes each job at
// once.
func dialFakeAgentTo(ctx context.Context, addr, token, id string, held chan dispatched) (*fakeAgent, error) {
	hold := held != nil
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, "ws://"+addr+"/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		return nil, fmt.Errorf("dial agent %s: %w", id, err)
	}
	ws.SetReadLimit(protocol.MaxMessageBytes)
	f := &fakeAgent{id: id, ws: ws, hold: hold, held: held, done: make(chan struct{})}
	if err := f.send(dctx, &protocol.Register{AgentID: id, Version: "bench", OS: runtime.GOOS, Arch: runtime.GOARCH, Concurrency: 1}); err != nil {
		ws.CloseNow()
		return nil, err
	}
	_, data, err := ws.Read(dctx)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("agent %s: read registered: %w", id, err)
	}
	m, err := protocol.Decode(data)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("agent %s: %w", id, err)
	}
	reg, ok := m.(*protocol.Registered)
	if !ok {
		ws.CloseNow()
		return nil, fmt.Errorf("agent %s: got %s, want registered", id, m.Type())
	}
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = rcancel
	go f.heartbeats(rctx, reg.HeartbeatInterval())
	go f.read(rctx)
	return f, nil
}

func (f *fakeAgent) send(ctx context.Context, m protocol.Message) error {
	data, err := protocol.Encode(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.ws.Write(ctx, websocket.MessageText, data); err != nil {
		return fmt.Errorf("agent %s: send %s: %w", f.id, m.Type(), err)
	}
	return nil
}

func (f *fakeAgent) heartbeats(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.mu.Lock()
			busy := append([]string(nil), f.busy...)
			f.mu.Unlock()
			if f.send(ctx, &protocol.Heartbeat{Time: time.Now(), Busy: busy}) != nil {
				return
			}
		}
	}
}

// read handles the orchestrator's messages until the connection ends.
func (f *fakeAgent) read(ctx context.Context) {
	defer close(f.done)
	for {
		_, data, err := f.ws.Read(ctx)
		at := time.Now()
		if err != nil {
			f.setErr(err)
			return
		}
		m, err := protocol.Decode(data)
		if err != nil {
			f.setErr(err)
			return
		}
		d, ok := m.(*protocol.JobDispatch)
		if !ok {
			continue // heartbeat, job.ackseq, error: nothing to do
		}
		f.mu.Lock()
		f.busy = append(f.busy, d.JobID)
		f.mu.Unlock()
		if err := f.send(ctx, &protocol.JobAck{JobID: d.JobID, Seq: 1}); err != nil {
			f.setErr(err)
			return
		}
		if f.hold {
			f.held <- dispatched{msg: d, at: at, agent: f}
			continue
		}
		if err := f.finish(ctx, d); err != nil {
			f.setErr(err)
			return
		}
	}
}

// finish reports a dispatched (and acked) job running and successful, in
// one burst.
func (f *fakeAgent) finish(ctx context.Context, d *protocol.JobDispatch) error {
	seq := uint64(1)
	next := func() uint64 { seq++; return seq }
	now := time.Now()
	msgs := []protocol.Message{
		&protocol.JobStatus{JobID: d.JobID, Seq: next(), Status: protocol.JobRunning},
		&protocol.LogChunk{JobID: d.JobID, Seq: next(), Step: protocol.JobLevelStep, Lines: []protocol.LogLine{{TS: now, Text: "bench fake agent: nothing to check out"}}},
	}
	for i := range d.Job.Steps {
		msgs = append(msgs,
			&protocol.StepStatus{JobID: d.JobID, Seq: next(), Step: i, Status: protocol.StepRunning, StartedAt: now},
			&protocol.StepStatus{JobID: d.JobID, Seq: next(), Step: i, Status: protocol.StepSuccess, StartedAt: now, FinishedAt: now})
	}
	msgs = append(msgs, &protocol.JobStatus{JobID: d.JobID, Seq: next(), Status: protocol.JobSuccess})
	for i, m := range msgs {
		// Written at once, as kici-agent writes what it held (protocol.Burst).
		m.(protocol.JobScoped).SetMore(i < len(msgs)-1)
		if err := f.send(ctx, m); err != nil {
			return err
		}
	}
	f.mu.Lock()
	for i, id := range f.busy {
		if id == d.JobID {
			f.busy = append(f.busy[:i], f.busy[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	return nil
}

func (f *fakeAgent) setErr(err error) {
	f.mu.Lock()
	if f.err == nil && !errors.Is(err, context.Canceled) {
		f.err = err
	}
	f.mu.Unlock()
}

// failure returns what ended the connection, if it ended unasked.
func (f *fakeAgent) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *fakeAgent) close() {
	_ = f.ws.Close(websocket.StatusNormalClosure, "bench done")
	f.cancel()
	select {
	case <-f.done:
	case <-time.After(5 * time.Second):
		f.ws.CloseNow()
	}
}
