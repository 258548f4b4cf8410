// Package agentws is the orchestrator's /ws endpoint: it authenticates
// agents, reads their registration, and then shuttles messages between
// one WebSocket and the dispatcher. It holds no business rules: what a
// message means is decided by the dispatch package.
//
// A *Handler is an http.Handler and is safe for concurrent use; each
// connection is served by its own goroutines.
package agentws

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/dispatch"
	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/store"
)

// Config tunes the endpoint.
type Config struct {
	// NoAuth accepts agents without a token (loopback development only).
	NoAuth bool
	// WriteTimeout bounds one message write.
	WriteTimeout time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// TrustedProxies name the reverse proxies whose X-Forwarded-For
	// gives the agent's address in the audit log (see auth.ClientAddr).
	TrustedProxies []netip.Prefix
}

// TokenStore looks agent tokens up by the hex SHA-256 of the token
// (auth.HashToken) and records their use.
type TokenStore interface {
	AgentTokenByHash(ctx context.Context, hash string) (store.AgentToken, error)
	TouchAgentToken(ctx context.Context, id string, at time.Time) error
}

// Auditor records refused registrations in the audit log.
type Auditor interface {
	Record(ctx context.Context, e store.AuditEntry)
}

// Handler serves /ws.
type Handler struct {
	log    *slog.Logger
	disp   *dispatch.Dispatcher
	tokens TokenStore
	audit  Auditor
	cfg    Config

	// The open connections, so Close can end them: the HTTP server's
	// Shutdown neither closes nor waits for a hijacked (WebSocket)
	// connection, whose goroutine would otherwise outlive the database.
	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New returns the /ws handler. audit may be nil.
func New(logger *slog.Logger, disp *dispatch.Dispatcher, tokens TokenStore, audit Auditor, cfg Config) *Handler {
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{log: logger, disp: disp, tokens: tokens, audit: audit, cfg: cfg, conns: map[*conn]struct{}{}}
}

// Close closes every agent connection with 1001 (going away; the agents
// reconnect to the next orchestrator), refuses new ones, and waits until
// their goroutines have finished or ctx ends.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	for c := range h.conns {
		c.Close(int(websocket.StatusGoingAway), "orchestrator shutting down")
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("agent connections still open: %w", ctx.Err())
	}
}

// track adds c to the open connections; false once Close has begun.
func (h *Handler) track(c *conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	return true
}

func (h *Handler) closing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

func (h *Handler) untrack(c *conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	h.wg.Done()
}

// errUnauthorized is a missing, unknown, revoked or expired token.
var errUnauthorized = errors.New("unauthorized")

// credentials is what an agent authenticated with: a stored agent token,
// or a scaler agent's single-use token (checked by the scaler manager when
// the agent registers), or nothing under KICI_AGENT_AUTH=none.
type credentials struct {
	token  *store.AgentToken
	hash   string // of token
	scaler string
	client string // the client's address
	via    string // the worker that relays the agent, if any
}

func (h *Handler) authenticate(r *http.Request) (credentials, error) {
	return h.authenticateHeader(r.Context(), r.Header.Get("Authorization"))
}

// authenticateHeader checks an Authorization header's agent token.
func (h *Handler) authenticateHeader(ctx context.Context, header string) (credentials, error) {
	scheme, token, _ := strings.Cut(header, " ")
	if strings.EqualFold(scheme, "Bearer") && scaler.IsScalerToken(token) {
		return credentials{scaler: token}, nil
	}
	if h.cfg.NoAuth {
		return credentials{}, nil
	}
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return credentials{}, errUnauthorized
	}
	hash := auth.HashToken(token)
	t, err := h.tokens.AgentTokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return credentials{}, errUnauthorized
	}
	if err != nil {
		return credentials{}, err
	}
	if !usable(t, hash, h.cfg.Now()) {
		return credentials{}, errUnauthorized
	}
	if err := h.tokens.TouchAgentToken(ctx, t.ID, h.cfg.Now()); err != nil {
		h.log.Warn("record agent token use failed", "token_id", t.ID, "error", err)
	}
	return credentials{token: &t, hash: hash}, nil
}

// usable reports whether a looked-up token matches hash (compared in
// constant time) and is neither revoked nor expired.
func usable(t store.AgentToken, hash string, now time.Time) bool {
	return subtle.ConstantTimeCompare([]byte(t.Hash), []byte(hash)) == 1 &&
		t.RevokedAt == nil && (t.ExpiresAt == nil || t.ExpiresAt.After(now))
}

// stillUsable looks the token up again: a revocation between the upgrade
// and the registration must not let the agent in.
func (h *Handler) stillUsable(ctx context.Context, cred credentials) bool {
	if cred.token == nil {
		return true
	}
	t, err := h.tokens.AgentTokenByHash(ctx, cred.hash)
	return err == nil && usable(t, cred.hash, h.cfg.Now())
}

// refuse records a refused registration in the audit log.
func (h *Handler) refuse(ctx context.Context, cred credentials, agentID string, code int, reason string) {
	if h.audit == nil {
		return
	}
	e := store.AuditEntry{ActorType: auth.ActorAnonymous, Action: "agent.register", Target: "agent:" + agentID,
		Outcome: auth.OutcomeDenied, Detail: fmt.Sprintf("close %d: %s", code, reason), ClientAddr: cred.client}
	switch {
	case cred.token != nil:
		e.ActorType, e.ActorID = auth.ActorAgentToken, cred.token.ID
	case cred.scaler != "":
		e.ActorType = "scaler_agent"
	}
	h.audit.Record(ctx, e)
}

// ServeHTTP authenticates the agent, upgrades to a WebSocket and serves
// it until it disconnects.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, err := h.authenticate(r)
	tok.client = auth.ClientAddr(r, h.cfg.TrustedProxies)
	if errors.Is(err, errUnauthorized) {
		http.Error(w, "agent token missing, unknown, revoked or expired", http.StatusUnauthorized)
		return
	}
	if err != nil {
		h.log.Error("agent authentication failed", "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept wrote the response
	}
	ws.SetReadLimit(protocol.MaxMessageBytes)
	c := newConn(ws, h.cfg.WriteTimeout)
	if !h.track(c) {
		ws.Close(websocket.StatusGoingAway, "orchestrator shutting down")
		return
	}
	defer h.untrack(c)
	h.serve(r.Context(), c, tok)
}

// MessageConn is an agent's message stream: its WebSocket, or a stream a
// cluster worker relays for an agent connected to it (*websocket.Conn
// is one).
type MessageConn interface {
	Read(ctx context.Context) (websocket.MessageType, []byte, error)
	Write(ctx context.Context, typ websocket.MessageType, p []byte) error
	Close(code websocket.StatusCode, reason string) error
}

// ErrUnauthorized is ServeRelayed's answer for an agent token that is
// missing, unknown, revoked or expired.
var ErrUnauthorized = errors.New("agent token missing, unknown, revoked or expired")

// ServeRelayed serves an agent connected to a cluster worker, whose
// messages the worker relays over mc: authorization is the Authorization
// header the agent sent the worker, client the agent's address as the
// worker saw it. It authenticates the token first and tells authorized
// the outcome (nil, ErrUnauthorized, or the failure to check), before it
// reads anything; then it serves until the stream ends.
func (h *Handler) ServeRelayed(ctx context.Context, mc MessageConn, authorization, client, node string, authorized func(error)) error {
	cred, err := h.authenticateHeader(ctx, authorization)
	cred.client, cred.via = client, node
	if errors.Is(err, errUnauthorized) {
		err = ErrUnauthorized
	}
	authorized(err)
	if err != nil {
		return err
	}
	c := newConn(mc, h.cfg.WriteTimeout)
	if !h.track(c) {
		_ = mc.Close(websocket.StatusGoingAway, "orchestrator shutting down")
		return nil
	}
	defer h.untrack(c)
	h.serve(ctx, c, cred)
	return nil
}

// conn is one agent's WebSocket, safe for concurrent writes.
type conn struct {
	ws      MessageConn
	timeout time.Duration
	mu      sync.Mutex
	once    sync.Once
	// ready is closed once the registered reply is written (or the
	// connection is given up): the dispatcher may pick the agent as soon
	// as it is registered, but the agent must read registered first, or
	// it takes the dispatch for a protocol error and drops it.
	ready     chan struct{}
	readyOnce sync.Once
}

func newConn(ws MessageConn, timeout time.Duration) *conn {
	return &conn{ws: ws, timeout: timeout, ready: make(chan struct{})}
}

// open lets messages other than the registered reply through.
func (c *conn) open() { c.readyOnce.Do(func() { close(c.ready) }) }

func (c *conn) Send(ctx context.Context, m protocol.Message) error {
	data, err := protocol.Encode(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	if _, reply := m.(*protocol.Registered); !reply {
		select {
		case <-c.ready:
		case <-ctx.Done():
			return fmt.Errorf("send %s: the agent's registration was not answered within %s", m.Type(), c.timeout)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws.Write(ctx, websocket.MessageText, data)
}

// maxCloseReason is what a WebSocket close frame can carry of a reason
// (RFC 6455 §5.5: 125 bytes of payload, 2 of them the code); a longer one
// makes the frame invalid and the peer sees no code at all.
const maxCloseReason = 123

func (c *conn) Close(code int, reason string) {
	if len(reason) > maxCloseReason {
		reason = strings.ToValidUTF8(reason[:maxCloseReason-3], "") + "..."
	}
	c.once.Do(func() {
		go c.ws.Close(websocket.StatusCode(code), reason)
	})
}

func (h *Handler) serve(ctx context.Context, c *conn, cred credentials) {
	tok := cred.token
	reg, err := h.readRegister(ctx, c)
	if err != nil {
		h.log.Warn("agent registration failed", "error", err)
		return
	}
	if tok != nil {
		if l, ok := labelsAllowed(tok.Labels, reg.Labels); !ok {
			reason := fmt.Sprintf("label %q is not allowed by this agent token (it allows %s)", l, strings.Join(tok.Labels, ", "))
			h.log.Warn("agent refused", "agent_id", reg.AgentID, "token_id", tok.ID, "reason", reason)
			h.refuse(ctx, cred, reg.AgentID, protocol.CloseLabelsNotAllowed, reason)
			c.Close(protocol.CloseLabelsNotAllowed, reason)
			return
		}
	}
	a := dispatch.NewAgent(reg, c, "static", h.cfg.Now())
	switch {
	case tok != nil:
		a.TokenID, a.TokenExpires = tok.ID, tok.ExpiresAt
		a.Credential = "token:" + tok.ID
	case cred.scaler != "":
		a.Credential = "scaler"
		a.Via = cred.via
	}
	log := h.log.With("agent_id", a.ID)
	reply, err := h.disp.Register(ctx, a, reg.InFlight, cred.scaler)
	var refused *dispatch.RefusedError
	if errors.As(err, &refused) {
		log.Warn("agent refused", "reason", refused.Reason)
		h.refuse(ctx, cred, a.ID, refused.Code, refused.Reason)
		c.Close(refused.Code, refused.Reason)
		return
	}
	if err != nil {
		log.Error("register agent failed", "error", err)
		c.Close(int(websocket.StatusInternalError), "registration failed")
		return
	}
	defer func() {
		// An orchestrator shutting down leaves its agents' jobs as they
		// are, as a crash would: the next one gives them the recovery
		// window at start, and a scaler agent's compute must outlive the
		// restart to be adopted.
		if !h.closing() {
			h.disp.Unregister(context.WithoutCancel(ctx), a)
		}
	}()
	defer c.open() // on any early return, let waiting senders fail on the closed connection
	if !h.stillUsable(ctx, cred) {
		log.Warn("agent refused", "reason", "agent token revoked during registration")
		h.refuse(ctx, cred, a.ID, protocol.CloseTokenRevoked, "agent token revoked")
		c.Close(protocol.CloseTokenRevoked, "agent token revoked")
		return
	}
	if err := c.Send(ctx, reply); err != nil {
		return
	}
	c.open()
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	interval := h.disp.HeartbeatInterval()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				if c.Send(hbCtx, &protocol.Heartbeat{Time: h.cfg.Now()}) != nil {
					return
				}
			}
		}
	}()
	// One goroutine reads; this one applies what has arrived meanwhile in
	// one batch (one transaction), so a burst of messages costs one
	// commit, and a slow commit does not stall reading.
	msgs := make(chan protocol.Message, dispatch.MaxBatch)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(msgs)
		h.readMessages(ctx, c, log, interval, msgs)
	}()
	defer func() {
		c.Close(int(websocket.StatusNormalClosure), "") // stops the reader if it still reads
		for range msgs {
		}
		<-readDone
	}()
	batch := make([]protocol.Message, 0, dispatch.MaxBatch)
	for {
		m, ok := <-msgs
		if !ok {
			return
		}
		batch = gather(append(batch[:0], m), msgs, dispatch.MaxBatch, burstWait)
		if !h.applyBatch(ctx, c, a, log, batch) {
			return
		}
	}
}

// gather adds to batch (which holds the first message) what msgs already
// has, and, while the last message says more follows (protocol.Burst), what
// arrives within wait of the first such message, up to max messages in
// all. It returns when msgs is closed too, with what came.
func gather(batch []protocol.Message, msgs <-chan protocol.Message, max int, wait time.Duration) []protocol.Message {
	var burst <-chan time.Time // started at the first message that says more follows
	for len(batch) < max {
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch
			}
			batch = append(batch, m)
			continue
		default:
		}
		if !batch[len(batch)-1].(protocol.JobScoped).MoreFollows() {
			return batch
		}
		if burst == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			burst = t.C
		}
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch
			}
			batch = append(batch, m)
		case <-burst:
			return batch // the rest of the burst is late: apply what came
		}
	}
	return batch
}

// burstWait bounds how long a batch waits for the next message of a burst
// (protocol.Burst): the agent wrote it right after the last one, so it is
// normally already on its way; an agent that sets More and sends nothing
// more only delays its own messages by this much.
const burstWait = 20 * time.Millisecond

// readMessages reads the connection's messages after registration and
// passes on the job-scoped ones, until the connection fails or sends
// something it must not (which closes it).
func (h *Handler) readMessages(ctx context.Context, c *conn, log *slog.Logger, interval time.Duration, out chan<- protocol.Message) {
	for {
		readCtx, cancel := context.WithTimeout(ctx, 2*interval)
		_, data, err := c.ws.Read(readCtx)
		cancel()
		if err != nil {
			if readCtx.Err() != nil && ctx.Err() == nil {
				c.Close(protocol.CloseHeartbeatTimeout, "no message within two heartbeat intervals")
			}
			log.Debug("agent connection ended", "error", err)
			return
		}
		m, err := protocol.Decode(data)
		if err != nil {
			c.Close(protocol.DecodeCloseCode(err), err.Error())
			return
		}
		if !protocol.SentByAgent(m.Type()) {
			c.Close(protocol.CloseUnexpectedMessage, "message "+m.Type()+" is not for an agent to send")
			return
		}
		if _, ok := m.(*protocol.Heartbeat); ok {
			continue
		}
		if _, ok := m.(protocol.JobScoped); !ok {
			c.Close(protocol.CloseUnexpectedMessage, "unexpected "+m.Type()+" after registration")
			return
		}
		select {
		case out <- m:
		case <-ctx.Done():
			return
		}
	}
}

// applyBatch applies a batch of an agent's messages and acknowledges
// them; false means the connection is done.
func (h *Handler) applyBatch(ctx context.Context, c *conn, a *dispatch.Agent, log *slog.Logger, batch []protocol.Message) bool {
	var res dispatch.BatchResult
	err := retry(ctx, applyRetryDelays, func() error {
		var err error
		res, err = h.disp.ApplyBatch(ctx, a, batch)
		if err != nil {
			log.Warn("apply agent messages failed; retrying", "messages", len(batch), "first", batch[0].Type(), "error", err)
		}
		return err
	})
	if err != nil {
		// Still not applied, and not acknowledged. The agent replays
		// what was not acknowledged when it reconnects, so close the
		// connection rather than leave the job stalled behind a lost
		// message. (A scaler agent's compute goes with its connection,
		// which is why a passing database fault is retried first.)
		log.Error("apply agent messages failed; closing so the agent replays", "messages", len(batch), "first", batch[0].Type(), "error", err)
		c.Close(int(websocket.StatusInternalError), "message not applied; reconnect and replay")
		return false
	}
	for _, foreign := range res.Foreign {
		// Dropped and not acknowledged: an agent speaking for a job
		// that is not its own gets nothing applied.
		log.Warn("agent message for a job not dispatched to it dropped", "error", foreign)
		if err := c.Send(ctx, &protocol.Error{Code: protocol.ErrorNotOwner, Message: foreign.Error()}); err != nil {
			return false
		}
	}
	for _, ack := range res.Acks {
		if err := c.Send(ctx, &protocol.JobAckSeq{JobID: ack.JobID, Seq: ack.Seq}); err != nil {
			return false
		}
	}
	return true
}

func (h *Handler) readRegister(ctx context.Context, c *conn) (*protocol.Register, error) {
	rctx, cancel := context.WithTimeout(ctx, protocol.RegisterTimeout)
	defer cancel()
	_, data, err := c.ws.Read(rctx)
	if err != nil {
		c.Close(protocol.CloseRegisterTimeout, "no register message in time")
		return nil, fmt.Errorf("read register: %w", err)
	}
	m, err := protocol.Decode(data)
	if err != nil {
		c.Close(protocol.DecodeCloseCode(err), err.Error())
		return nil, err
	}
	reg, ok := m.(*protocol.Register)
	if !ok {
		c.Close(protocol.CloseUnexpectedMessage, "the first message must be register")
		return nil, fmt.Errorf("first message is %s, not register", m.Type())
	}
	return reg, nil
}

// labelsAllowed checks the labels an agent registers with against its
// token's: every label must be one the token allows, except the kici:os:
// and kici:arch: labels every agent adds itself. A token with no labels
// allows any. It returns the first label not allowed.
func labelsAllowed(allowed, labels []string) (string, bool) {
	if len(allowed) == 0 {
		return "", true
	}
	for _, l := range labels {
		if strings.HasPrefix(l, "kici:os:") || strings.HasPrefix(l, "kici:arch:") {
			continue
		}
		if !slices.Contains(allowed, l) {
			return l, false
		}
	}
	return "", true
}

// applyRetryDelays are the pauses between attempts to apply one agent
// message. Applying is idempotent (a message's seq is applied at most
// once), so a retry is always safe; about two seconds in all ride out a
// database that dropped its connections, well inside a heartbeat interval.
var applyRetryDelays = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, 1600 * time.Millisecond}

// retry calls fn until it succeeds, pausing delays[i] before attempt i+2.
// It returns fn's last error, or ctx's error if ctx ends during a pause.
func retry(ctx context.Context, delays []time.Duration, fn func() error) error {
	err := fn()
	for _, d := range delays {
		if err == nil {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		err = fn()
	}
	return err
}
