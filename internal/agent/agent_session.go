package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/protocol"
)

// errHeartbeatTimeout ends a session that received nothing for two
// heartbeat intervals.
var errHeartbeatTimeout = errors.New("no message from the orchestrator for two heartbeat intervals")

// connectLoop keeps a connection to the orchestrator until ctx ends (it then
// returns nil) or the orchestrator refuses the agent for good (it returns
// the *StopError). After a connection ends or fails it moves to the next
// orchestrator URL at once, and waits with backoff only once it tried
// them all; the attempt counter starts again after every "registered".
func (a *Agent) connectLoop(ctx context.Context) error {
	attempt, tried := 0, 0
	for {
		registered, err := a.session(ctx)
		a.mu.Lock()
		if a.disconnectedAt.IsZero() {
			a.disconnectedAt = time.Now()
		}
		a.mu.Unlock()
		if ctx.Err() != nil {
			return nil
		}
		if stop := classify(err); stop != nil {
			return stop
		}
		if registered {
			attempt, tried = 0, 0
		}
		lost := a.urls[a.cur.Load()]
		tried++
		if n := len(a.urls); n > 1 {
			a.cur.Store((a.cur.Load() + 1) % int32(n))
			if tried%n != 0 {
				a.log.Warn("connection to the orchestrator lost; trying the next one", "url", lost, "error", err, "next", a.urls[a.cur.Load()])
				continue
			}
		}
		wait := backoff(attempt, a.cfg.ReconnectMin, a.cfg.ReconnectMax, a.jitter())
		attempt++
		a.log.Warn("connection to the orchestrator lost", "url", lost, "error", err, "retry_in", wait.String(), "next", a.urls[a.cur.Load()])
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// session runs one connection: dial, register, resume, then the read and
// write loops until either fails or ctx ends (the agent closes with its
// closeCode). registered reports whether the orchestrator accepted the
// registration.
func (a *Agent) session(ctx context.Context) (registered bool, err error) {
	header := http.Header{}
	if a.cfg.Token != "" {
		header.Set("Authorization", "Bearer "+a.cfg.Token)
	}
	dialCtx, cancel := context.WithTimeout(ctx, a.cfg.DialTimeout)
	target := a.urls[a.cur.Load()]
	conn, resp, err := websocket.Dial(dialCtx, target, &websocket.DialOptions{
		HTTPClient: a.cfg.HTTPClient,
		HTTPHeader: header,
	})
	cancel() // it bounds the handshake only
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return false, &StopError{Code: protocol.CloseUnauthorized, Reason: "HTTP 401 on the WebSocket upgrade: the agent token is missing or unknown"}
		}
		return false, fmt.Errorf("dial %q: %w", target, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(protocol.MaxMessageBytes)

	reg, sentInFlight, err := a.register(ctx, conn)
	if err != nil {
		return false, a.closeFor(conn, err)
	}
	a.lastRecv.Store(time.Now().UnixNano())
	a.afterRegistered(reg, sentInFlight)

	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	errc := make(chan error, 2)
	go func() { errc <- a.readLoop(loopCtx, conn) }()
	go func() { errc <- a.writeLoop(loopCtx, ctx.Done(), conn, reg.HeartbeatInterval()) }()
	err = <-errc
	err = a.closeFor(conn, err)
	stopLoops()
	<-errc
	return true, err
}

// closeFor closes conn as err says: with the protocol error's code, or at
// once. It returns err.
func (a *Agent) closeFor(conn *websocket.Conn, err error) error {
	var pe *protocolError
	if errors.As(err, &pe) {
		_ = conn.Close(websocket.StatusCode(pe.code), protocol.CloseReason(pe.code))
	} else {
		_ = conn.CloseNow()
	}
	return err
}

// register sends register and waits for registered. It returns the
// in-flight jobs it listed, which the resume answers.
func (a *Agent) register(ctx context.Context, conn *websocket.Conn) (*protocol.Registered, []protocol.InFlightJob, error) {
	inFlight := a.box.inFlight()
	msg := &protocol.Register{
		AgentID:     a.id,
		Labels:      a.labels,
		Version:     a.cfg.Version,
		Hostname:    a.hostname,
		OS:          runtime.GOOS,
		Arch:        runtime.GOARCH,
		Concurrency: a.cfg.Concurrency,
		InFlight:    inFlight,
		OneShot:     a.cfg.OneShot,
		ScalerAgent: a.cfg.ScalerAgent,
		Features:    []string{protocol.FeatureArchiveInline},
	}
	if err := a.write(ctx, conn, msg); err != nil {
		return nil, nil, err
	}
	regCtx, cancel := context.WithTimeout(ctx, a.cfg.RegisterTimeout)
	defer cancel()
	m, err := a.read(regCtx, conn)
	if err != nil {
		return nil, nil, fmt.Errorf("wait for registered: %w", err)
	}
	reg, ok := m.(*protocol.Registered)
	if !ok {
		return nil, nil, &protocolError{code: protocol.CloseUnexpectedMessage, err: fmt.Errorf("got %q before registered", m.Type())}
	}
	a.log.Info("registered", "server_version", reg.ServerVersion, "heartbeat_interval", reg.HeartbeatInterval().String(),
		"in_flight", len(inFlight), "resumed", len(reg.Resume))
	return reg, inFlight, nil
}

// afterRegistered applies the resume: jobs the orchestrator no longer gives
// this agent are killed; the others replay from their ack_seq and get a
// note about the gap.
func (a *Agent) afterRegistered(reg *protocol.Registered, sent []protocol.InFlightJob) {
	abandoned := a.box.resume(sent, reg.Resume)
	for _, id := range abandoned {
		a.abandon(id)
	}
	a.mu.Lock()
	gap := time.Duration(0)
	if !a.disconnectedAt.IsZero() {
		gap = time.Since(a.disconnectedAt)
	}
	a.disconnectedAt = time.Time{}
	var running []*runningJob
	for _, j := range a.jobs {
		if slices.ContainsFunc(reg.Resume, func(r protocol.ResumeJob) bool { return r.JobID == j.id }) {
			running = append(running, j)
		}
	}
	a.mu.Unlock()
	for _, j := range running {
		j.rep.note("reconnected to the orchestrator after %s offline; buffered output was replayed", gap.Round(time.Millisecond))
	}
}

// readLoop handles every message the orchestrator sends until the
// connection fails or a message breaks the protocol.
func (a *Agent) readLoop(ctx context.Context, conn *websocket.Conn) error {
	for {
		m, err := a.read(ctx, conn)
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *protocol.Heartbeat:
		case *protocol.JobDispatch:
			a.dispatch(m)
		case *protocol.JobCancel:
			a.cancel(m)
		case *protocol.JobAckSeq:
			a.box.ack(m.JobID, m.Seq)
		case *protocol.Error:
			a.log.Warn("orchestrator reported an error", "code", m.Code, "message", m.Message)
		default:
			return &protocolError{code: protocol.CloseUnexpectedMessage, err: fmt.Errorf("got %q after registered", m.Type())}
		}
	}
}

// read reads and decodes one message, refusing what the protocol refuses.
func (a *Agent) read(ctx context.Context, conn *websocket.Conn) (protocol.Message, error) {
	typ, data, err := conn.Read(ctx)
	if err != nil {
		return nil, err
	}
	a.lastRecv.Store(time.Now().UnixNano())
	if typ != websocket.MessageText {
		return nil, &protocolError{code: protocol.CloseMalformed, err: errors.New("got a binary frame, want text")}
	}
	m, err := protocol.Decode(data)
	if err != nil {
		return nil, &protocolError{code: protocol.DecodeCloseCode(err), err: err}
	}
	if !protocol.SentByServer(m.Type()) {
		return nil, &protocolError{code: protocol.CloseUnexpectedMessage, err: fmt.Errorf("got %q, which only agents send", m.Type())}
	}
	return m, nil
}

// writeLoop sends the outbox's unsent messages as they come, and a
// heartbeat every interval, until ctx (the session) ends. It ends the
// session when nothing arrived for two intervals, and closes the connection
// with the agent's closeCode when stop is closed (the agent stops).
func (a *Agent) writeLoop(ctx context.Context, stop <-chan struct{}, conn *websocket.Conn, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// linger wakes the loop when held messages are due. Reset drops a
	// value not yet received (Go 1.23 timers), so it needs no draining.
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	for {
		var lingering <-chan time.Time
		if hold := a.box.holdFor(time.Now(), a.cfg.StatusLinger); hold > 0 {
			linger.Reset(hold)
			lingering = linger.C
		} else {
			burst := a.box.takeUnsent()
			for i, m := range burst {
				m.SetMore(i < len(burst)-1) // see protocol.Burst
				if err := a.write(ctx, conn, m); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			code := websocket.StatusCode(a.closeCode.Load())
			_ = conn.Close(code, "agent stopping")
			return errors.New("agent stopping")
		case <-a.box.wake:
		case <-lingering:
		case <-tick.C:
			if time.Since(time.Unix(0, a.lastRecv.Load())) > 2*interval {
				return &protocolError{code: protocol.CloseHeartbeatTimeout, err: errHeartbeatTimeout}
			}
			if err := a.write(ctx, conn, &protocol.Heartbeat{Time: time.Now(), Busy: a.busy()}); err != nil {
				return err
			}
		}
	}
}

// write encodes and sends one message, bounded by the write timeout. A
// message that cannot be encoded is a bug; it is logged and skipped so that
// it cannot block the outbox.
func (a *Agent) write(ctx context.Context, conn *websocket.Conn, m protocol.Message) error {
	data, err := protocol.Encode(m)
	if err != nil {
		a.log.Error("drop a message that does not encode", "type", m.Type(), "error", err)
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.DialTimeout)
	defer cancel()
	if err := conn.Write(wctx, websocket.MessageText, data); err != nil {
		return fmt.Errorf("write %s: %w", m.Type(), err)
	}
	return nil
}
