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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
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
}

// TokenStore looks agent tokens up by the hex SHA-256 of the token.
type TokenStore interface {
	AgentTokenByHash(ctx context.Context, hash string) (store.AgentToken, error)
}

// Handler serves /ws.
type Handler struct {
	log    *slog.Logger
	disp   *dispatch.Dispatcher
	tokens TokenStore
	cfg    Config
}

// New returns the /ws handler.
func New(logger *slog.Logger, disp *dispatch.Dispatcher, tokens TokenStore, cfg Config) *Handler {
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{log: logger, disp: disp, tokens: tokens, cfg: cfg}
}

// HashToken is how agent tokens are stored: hex SHA-256.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// errUnauthorized is a missing, unknown, revoked or expired token.
var errUnauthorized = errors.New("unauthorized")

// credentials is what an agent authenticated with: a stored agent token,
// or a scaler agent's single-use token (checked by the scaler manager when
// the agent registers), or nothing under KICI_AGENT_AUTH=none.
type credentials struct {
	token  *store.AgentToken
	scaler string
}

func (h *Handler) authenticate(r *http.Request) (credentials, error) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "Bearer") && scaler.IsScalerToken(token) {
		return credentials{scaler: token}, nil
	}
	if h.cfg.NoAuth {
		return credentials{}, nil
	}
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return credentials{}, errUnauthorized
	}
	t, err := h.tokens.AgentTokenByHash(r.Context(), HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return credentials{}, errUnauthorized
	}
	if err != nil {
		return credentials{}, err
	}
	now := h.cfg.Now()
	if t.RevokedAt != nil || (t.ExpiresAt != nil && !t.ExpiresAt.After(now)) {
		return credentials{}, errUnauthorized
	}
	return credentials{token: &t}, nil
}

// ServeHTTP authenticates the agent, upgrades to a WebSocket and serves
// it until it disconnects.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, err := h.authenticate(r)
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
	c := &conn{ws: ws, timeout: h.cfg.WriteTimeout}
	h.serve(r.Context(), c, tok)
}

// conn is one agent's WebSocket, safe for concurrent writes.
type conn struct {
	ws      *websocket.Conn
	timeout time.Duration
	mu      sync.Mutex
	once    sync.Once
}

func (c *conn) Send(ctx context.Context, m protocol.Message) error {
	data, err := protocol.Encode(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws.Write(ctx, websocket.MessageText, data)
}

func (c *conn) Close(code int, reason string) {
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
	if tok != nil && len(tok.Labels) > 0 {
		for _, l := range reg.Labels {
			if strings.HasPrefix(l, "kici:os:") || strings.HasPrefix(l, "kici:arch:") {
				continue
			}
			if !slices.Contains(tok.Labels, l) {
				c.Close(protocol.CloseLabelsNotAllowed, fmt.Sprintf("label %q is not allowed by this agent token", l))
				return
			}
		}
	}
	a := dispatch.NewAgent(reg, c, "static", h.cfg.Now())
	log := h.log.With("agent_id", a.ID)
	reply, err := h.disp.Register(ctx, a, reg.InFlight, cred.scaler)
	var refused *dispatch.RefusedError
	if errors.As(err, &refused) {
		log.Warn("agent refused", "reason", refused.Reason)
		c.Close(refused.Code, refused.Reason)
		return
	}
	if err != nil {
		log.Error("register agent failed", "error", err)
		c.Close(int(websocket.StatusInternalError), "registration failed")
		return
	}
	defer h.disp.Unregister(context.WithoutCancel(ctx), a)
	if err := c.Send(ctx, reply); err != nil {
		return
	}
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
		seq, err := h.disp.Apply(ctx, a, m)
		if err != nil {
			log.Error("apply agent message failed", "type", m.Type(), "error", err)
			continue // not acknowledged: the agent will replay it
		}
		if seq > 0 {
			jobID, _ := m.(protocol.JobScoped).JobSeq()
			if err := c.Send(ctx, &protocol.JobAckSeq{JobID: jobID, Seq: seq}); err != nil {
				return
			}
		}
	}
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
