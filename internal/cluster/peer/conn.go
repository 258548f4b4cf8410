package peer

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// MaxFrame bounds one frame's JSON: a dispatched job with its secrets and
// a log chunk of the agent protocol's largest fit well within it.
const MaxFrame = 4 << 20

// DefaultIdleTimeout is how long a connection may receive nothing before
// it is closed, when Config.IdleTimeout is zero.
const DefaultIdleTimeout = 90 * time.Second

// ErrClosed is returned to the waiters of a connection that ended, and by
// Send and Request on it.
var ErrClosed = errors.New("peer connection closed")

// Frame is one message on the channel.
type Frame struct {
	// Type names the message, e.g. "peer.heartbeat".
	Type string `json:"type"`
	// ID is set on a request: the peer must answer it with a frame whose
	// ReplyTo is ID.
	ID string `json:"id,omitempty"`
	// ReplyTo is set on the answer to the request ID.
	ReplyTo string `json:"reply_to,omitempty"`
	// Error is an answer's explicit failure.
	Error string `json:"error,omitempty"`
	// Body is the message's payload.
	Body json.RawMessage `json:"body,omitempty"`
}

// Decode unmarshals the frame's body into v.
func (f Frame) Decode(v any) error {
	if len(f.Body) == 0 {
		return fmt.Errorf("%s: empty body", f.Type)
	}
	if err := json.Unmarshal(f.Body, v); err != nil {
		return fmt.Errorf("%s: %w", f.Type, err)
	}
	return nil
}

// RemoteError is an answer that carried an explicit failure.
type RemoteError struct {
	Type    string // the request's type
	Message string
}

func (e *RemoteError) Error() string { return e.Type + " refused by the peer: " + e.Message }

// Config tunes a connection.
type Config struct {
	// IdleTimeout closes a connection that received nothing for this
	// long; 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// Conn is one open channel with a peer.
type Conn struct {
	tls    *tls.Conn
	peerID string
	idle   time.Duration

	wmu sync.Mutex // one frame at a time

	mu      sync.Mutex
	waiters map[string]chan Frame
	closed  bool
	done    chan struct{}
	err     error
}

func newConn(tc *tls.Conn, peerID string, cfg Config) *Conn {
	idle := cfg.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	return &Conn{tls: tc, peerID: peerID, idle: idle, waiters: map[string]chan Frame{}, done: make(chan struct{})}
}

// PeerID is the peer's node id: on a coordinator, the id of the worker's
// certificate (empty for a worker that connected without one to join);
// on a worker, the coordinator's instance id from its welcome.
func (c *Conn) PeerID() string { return c.peerID }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Send writes one frame of type typ with body (marshalled to JSON). ctx
// bounds the write.
func (c *Conn) Send(ctx context.Context, typ string, body any) error {
	return c.write(ctx, Frame{Type: typ}, body)
}

// Request sends a request and waits for its answer, until ctx ends or the
// connection does (ErrClosed). An answer with an error is a *RemoteError.
func (c *Conn) Request(ctx context.Context, typ string, body any) (Frame, error) {
	id := newID()
	ch := make(chan Frame, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Frame{}, ErrClosed
	}
	c.waiters[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
	}()
	if err := c.write(ctx, Frame{Type: typ, ID: id}, body); err != nil {
		return Frame{}, err
	}
	answer := func(f Frame) (Frame, error) {
		if f.Error != "" {
			return f, &RemoteError{Type: typ, Message: f.Error}
		}
		return f, nil
	}
	select {
	case f := <-ch:
		return answer(f)
	case <-ctx.Done():
		return Frame{}, fmt.Errorf("%s: no answer: %w", typ, context.Cause(ctx))
	case <-c.done:
		// A peer may answer and close at once (a join): the answer read
		// before the end wins over the end.
		select {
		case f := <-ch:
			return answer(f)
		default:
		}
		return Frame{}, fmt.Errorf("%s: %w", typ, ErrClosed)
	}
}

// Reply answers the request req: with body, or with failure when it is
// not nil (its message is what the requester's RemoteError says).
func (c *Conn) Reply(ctx context.Context, req Frame, body any, failure error) error {
	f := Frame{Type: req.Type, ReplyTo: req.ID}
	if failure != nil {
		f.Error = failure.Error()
		body = nil
	}
	return c.write(ctx, f, body)
}

func (c *Conn) write(ctx context.Context, f Frame, body any) error {
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s: encode: %w", f.Type, err)
		}
		f.Body = b
	}
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("%s: encode: %w", f.Type, err)
	}
	if len(data) > MaxFrame {
		return fmt.Errorf("%s: frame of %d bytes, at most %d", f.Type, len(data), MaxFrame)
	}
	buf := make([]byte, 4+len(data))
	binary.BigEndian.PutUint32(buf, uint32(len(data)))
	copy(buf[4:], data)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.idle)
	}
	_ = c.tls.SetWriteDeadline(deadline)
	if _, err := c.tls.Write(buf); err != nil {
		c.fail(fmt.Errorf("write %s: %w", f.Type, err))
		return fmt.Errorf("%s: %w", f.Type, ErrClosed)
	}
	return nil
}

// Run reads frames until the connection ends or ctx does, handing each
// request and message to handle (in order, on Run's goroutine: a handler
// that takes long should answer from a goroutine of its own) and each
// answer to its waiter. It returns why the connection ended, and closes
// it.
func (c *Conn) Run(ctx context.Context, handle func(ctx context.Context, f Frame)) error {
	stop := context.AfterFunc(ctx, func() { c.fail(context.Cause(ctx)) })
	defer stop()
	hdr := make([]byte, 4)
	for {
		f, err := c.read(hdr)
		if err != nil {
			c.fail(err)
			return c.cause()
		}
		if f.ReplyTo != "" {
			c.mu.Lock()
			ch := c.waiters[f.ReplyTo]
			c.mu.Unlock()
			if ch != nil {
				select {
				case ch <- f:
				default:
				}
			}
			continue
		}
		handle(ctx, f)
	}
}

func (c *Conn) read(hdr []byte) (Frame, error) {
	start := time.Now()
	_ = c.tls.SetReadDeadline(start.Add(c.idle))
	if _, err := io.ReadFull(c.tls, hdr); err != nil {
		// The WebSocket's deadline surfaces as a cancelled read, not
		// always as a net.Error timeout: the time tells.
		var ne net.Error
		if (errors.As(err, &ne) && ne.Timeout()) || time.Since(start) >= c.idle {
			return Frame{}, fmt.Errorf("nothing received for %s: %w", c.idle, err)
		}
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if n == 0 || n > MaxFrame {
		return Frame{}, fmt.Errorf("frame of %d bytes announced, want 1 to %d", n, MaxFrame)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(c.tls, data); err != nil {
		return Frame{}, err
	}
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return Frame{}, fmt.Errorf("malformed frame: %w", err)
	}
	if f.Type == "" {
		return Frame{}, errors.New("malformed frame: no type")
	}
	return f, nil
}

// fail ends the connection with err, once.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.err = true, err
	close(c.done)
	c.mu.Unlock()
	_ = c.tls.Close()
}

func (c *Conn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection; Run returns and every waiter fails.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
