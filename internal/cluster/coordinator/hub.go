// Package coordinator is the coordinator's end of the cluster channel:
// it serves /ws/peer, proves itself with a serving certificate from the
// cluster CA, accepts workers that present a certificate of that CA, and
// records each connected worker's heartbeats in the instance table, so
// that every coordinator lists it among the peers.
//
// Jobs a coordinator cannot place are routed to workers' scalers
// (scalers.go), and what those report comes back through the workers'
// outboxes.
//
// A *Hub is safe for concurrent use. Only the orchestrator imports it.
package coordinator

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/cluster/join"
	"github.com/kici-dev/kici/internal/cluster/peer"
	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/cluster/worker"
)

// Bounds of a worker's heartbeat TTL: it lives for three of its
// intervals, but never less than MinWorkerTTL.
const (
	MinWorkerTTL = 10 * time.Second
	maxWorkerTTL = 5 * time.Minute
)

// serverCertTTL is the lifetime of the coordinator's serving
// certificate; it is renewed when a third of it is left.
const serverCertTTL = 7 * 24 * time.Hour

// CASource gives the cluster CA (a *join.Service), creating it on first
// use.
type CASource interface {
	EnsureCA(ctx context.Context) (*pki.CA, error)
}

// Joiner admits a worker at its first join (a *join.Service).
type Joiner interface {
	Join(ctx context.Context, req join.JoinRequest) (join.JoinResponse, error)
}

// relayCloseTimeout bounds the notice that a relayed stream ended.
const relayCloseTimeout = 5 * time.Second

// joinTimeout is how long a connection without a certificate may stay to
// make its join.
const joinTimeout = 15 * time.Second

// Workers is what the hub records of workers (a *store.DB).
type Workers interface {
	TouchWorker(ctx context.Context, id, addr, hostname string, ttl time.Duration) error
}

// ScalerAgentsRecorder is implemented by Workers that keep the scaler
// agents each worker lists (a *store.DB): a worker whose agents hold jobs
// is not forgotten.
type ScalerAgentsRecorder interface {
	RecordWorkerScalerAgents(ctx context.Context, id string, agents []string) error
}

// Revocations says which workers an operator revoked (a *store.DB).
type Revocations interface {
	NodeRevoked(ctx context.Context, id string) (bool, error)
}

// revoked reports whether worker id was revoked, checked at its connect,
// at each heartbeat and at each renewal when Workers keeps revocations. A
// failed check lets the worker on (and is logged): a database hiccup
// must not cut every worker off; the next heartbeat checks again.
func (h *Hub) revoked(ctx context.Context, id string) bool {
	rv, ok := h.cfg.Workers.(Revocations)
	if !ok {
		return false
	}
	yes, err := rv.NodeRevoked(ctx, id)
	if err != nil {
		h.log.Warn("check whether a worker is revoked", "node_id", id, "error", err)
		return false
	}
	if yes {
		h.log.Warn("revoked worker refused", "node_id", id)
	}
	return yes
}

// Config configures a Hub.
type Config struct {
	// SelfID is this coordinator's instance id.
	SelfID  string
	CA      CASource
	Workers Workers
	// Joiner admits workers joining over the channel; nil accepts none.
	Joiner Joiner
	// Agents serves the agents workers relay; nil serves none.
	Agents AgentServer
	// Scalers takes what workers' scalers report; nil refuses it.
	Scalers ScalerReports
	Log     *slog.Logger
}

// ScalerReports takes what a worker's scalers send a coordinator.
type ScalerReports interface {
	// ApplyOutbox applies one outbox entry exactly once and says up to
	// where the stream is applied.
	ApplyOutbox(ctx context.Context, nodeID string, e worker.OutboxEntry) (worker.OutboxAck, error)
	// Retire stops an idle agent connected here from taking jobs.
	Retire(agentID string) worker.RetireReply
	// CapacityFreed offers waiting jobs again.
	CapacityFreed()
}

// maxWorkerRequests bounds the requests of one worker a hub serves at
// once; more are refused with "busy", and the worker tries again.
const maxWorkerRequests = 16

// Hub serves /ws/peer.
type Hub struct {
	cfg Config
	log *slog.Logger

	certMu sync.Mutex
	ca     *pki.CA
	key    *ecdsa.PrivateKey
	cert   *tls.Certificate
	expiry time.Time

	mu     sync.Mutex
	conns  map[string]*peer.Conn       // by worker node id
	beats  map[string]worker.Heartbeat // the last heartbeat of each connected worker
	closed bool
	served sync.WaitGroup // the channels being served
}

// New returns a hub.
func New(cfg Config) *Hub {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Hub{cfg: cfg, log: cfg.Log, conns: map[string]*peer.Conn{}, beats: map[string]worker.Heartbeat{}}
}

// Connected returns the node ids of the workers connected here, sorted.
func (h *Hub) Connected() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.conns))
	for id := range h.conns {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// serving returns the CA and a current serving certificate, issuing one
// when there is none or a third of its life is left.
func (h *Hub) serving(ctx context.Context) (*pki.CA, *tls.Certificate, error) {
	h.certMu.Lock()
	defer h.certMu.Unlock()
	if h.ca == nil {
		ca, err := h.cfg.CA.EnsureCA(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster CA: %w", err)
		}
		h.ca = ca
	}
	now := time.Now()
	if h.cert != nil && now.Before(h.expiry.Add(-serverCertTTL/3)) {
		return h.ca, h.cert, nil
	}
	if h.key == nil {
		key, err := pki.NewNodeKey()
		if err != nil {
			return nil, nil, err
		}
		h.key = key
	}
	certPEM, err := h.ca.SignServer(h.key.Public(), []string{peer.CoordinatorServerName}, serverCertTTL, now)
	if err != nil {
		return nil, nil, fmt.Errorf("serving certificate: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(h.key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		return nil, nil, fmt.Errorf("serving certificate: %w", err)
	}
	h.cert, h.expiry = &cert, now.Add(serverCertTTL)
	return h.ca, h.cert, nil
}

// ServeHTTP accepts a worker on /ws/peer and serves its channel until it
// ends.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ca, _, err := h.serving(r.Context())
	if err != nil {
		h.log.Error("cluster channel unavailable", "error", err)
		http.Error(w, "the cluster channel is not available on this coordinator", http.StatusServiceUnavailable)
		return
	}
	c, err := peer.Accept(w, r, peer.ServerConfig{SelfID: h.cfg.SelfID, CA: ca.Certificate(),
		Certificate: func() (*tls.Certificate, error) {
			_, cert, err := h.serving(context.Background())
			return cert, err
		},
		// Workers beat at most every worker.MaxHeartbeat: three of those
		// without a frame mean a dead or cut-off worker.
		Config:    peer.Config{IdleTimeout: 3 * worker.MaxHeartbeat},
		AllowJoin: h.cfg.Joiner != nil,
		// A revoked worker is refused before its welcome: it never counts
		// itself connected.
		Admit: func(ctx context.Context, id string) error {
			if h.revoked(ctx, id) {
				return errors.New("this worker was revoked")
			}
			return nil
		}})
	if err != nil {
		h.log.Warn("peer refused", "remote", r.RemoteAddr, "error", err)
		return
	}
	id := c.PeerID()
	if id == "" {
		h.serveJoin(r, c)
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = c.Close()
		return
	}
	old := h.conns[id]
	h.conns[id] = c
	h.served.Add(1)
	h.mu.Unlock()
	defer h.served.Done()
	if old != nil {
		_ = old.Close() // the worker reconnected: its old channel is dead
	}
	h.log.Info("worker connected", "node_id", id, "remote", r.RemoteAddr)
	ss := &streams{m: map[string]*relayed{}}
	defer ss.endAll() // their agents reconnect through the worker, to a coordinator it still reaches
	sem := make(chan struct{}, maxWorkerRequests)
	err = c.Run(context.WithoutCancel(r.Context()), func(ctx context.Context, f peer.Frame) {
		if h.handleRelay(ctx, c, ss, f) || h.handleScaler(ctx, id, c, sem, f) {
			return
		}
		switch f.Type {
		case worker.TypeHeartbeat:
			var hb worker.Heartbeat
			if err := f.Decode(&hb); err != nil {
				h.log.Warn("malformed heartbeat", "node_id", id, "error", err)
				return
			}
			if h.revoked(ctx, id) {
				_ = c.Close() // revoked while connected
				return
			}
			changed := h.recordBeat(id, c, hb)
			_ = c.Send(ctx, worker.TypeHeartbeatAck, struct{}{})
			if err := h.cfg.Workers.TouchWorker(ctx, id, r.RemoteAddr, truncate(hb.Hostname, 255), ttl(hb.IntervalMS, len(h.Connected()))); err != nil {
				h.log.Error("record worker heartbeat failed", "node_id", id, "error", err)
				return
			}
			if rec, ok := h.cfg.Workers.(ScalerAgentsRecorder); ok && changed {
				if err := rec.RecordWorkerScalerAgents(ctx, id, hb.ScalerAgents); err != nil {
					h.log.Error("record worker's scaler agents failed", "node_id", id, "error", err)
				}
			}
		case worker.TypeRenew:
			if h.revoked(ctx, id) {
				_ = c.Reply(ctx, f, nil, errors.New("this worker was revoked"))
				_ = c.Close()
				return
			}
			cert, err := h.renew(ca, id, f)
			if err != nil {
				h.log.Warn("certificate renewal refused", "node_id", id, "error", err)
				_ = c.Reply(ctx, f, nil, err)
				return
			}
			_ = c.Reply(ctx, f, worker.Renewed{CertificatePEM: string(cert)}, nil)
			h.log.Info("worker certificate renewed", "node_id", id)
		default:
			if f.ID != "" {
				_ = c.Reply(ctx, f, nil, fmt.Errorf("%s is not handled by this coordinator", f.Type))
			}
		}
	})
	h.mu.Lock()
	if h.conns[id] == c {
		delete(h.conns, id)
		delete(h.beats, id)
	}
	h.mu.Unlock()
	h.log.Info("worker disconnected", "node_id", id, "reason", err)
}

// serveJoin serves a connection without a certificate: it may make one
// join, within joinTimeout, and is closed after the answer.
func (h *Hub) serveJoin(r *http.Request, c *peer.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), joinTimeout)
	defer cancel()
	defer c.Close()
	_ = c.Run(ctx, func(ctx context.Context, f peer.Frame) {
		if f.Type != worker.TypeJoin || f.ID == "" {
			_ = c.Reply(ctx, f, nil, fmt.Errorf("%s: a connection without a certificate may only join", f.Type))
			cancel()
			return
		}
		_ = c.Reply(ctx, f, h.join(ctx, r.RemoteAddr, f), nil)
		cancel() // one join per connection; the worker dials again with its certificate
	})
}

// join answers one join request.
func (h *Hub) join(ctx context.Context, remote string, f peer.Frame) worker.Joined {
	var req worker.Join
	if err := f.Decode(&req); err != nil {
		return worker.Joined{Refused: err.Error()}
	}
	if len(req.CSRPEM) > 16<<10 {
		return worker.Joined{Refused: fmt.Sprintf("certificate request of %d bytes, at most 16 KiB", len(req.CSRPEM))}
	}
	res, err := h.cfg.Joiner.Join(ctx, join.JoinRequest{TokenID: req.TokenID, Secret: req.Secret, NodeID: req.NodeID, CSRPEM: []byte(req.CSRPEM)})
	if err != nil {
		permanent := errors.Is(err, join.ErrTokenInvalid) || errors.Is(err, join.ErrTokenUsed) || errors.Is(err, join.ErrTokenExpired) ||
			errors.Is(err, join.ErrTokenRevoked) || errors.Is(err, join.ErrBadRequest)
		h.log.Warn("join refused", "remote", remote, "token_id", truncate(req.TokenID, 64), "error", err)
		if !permanent {
			return worker.Joined{Refused: "the coordinator cannot admit workers now; try again", Retry: true}
		}
		return worker.Joined{Refused: err.Error()}
	}
	h.log.Info("worker joined over the cluster channel", "remote", remote, "node_id", res.NodeID)
	return worker.Joined{CertificatePEM: string(res.CertificatePEM)}
}

// Close ends every worker channel and waits, until ctx ends, for their
// handlers to return; channels accepted after it are closed at once.
func (h *Hub) Close(ctx context.Context) {
	h.mu.Lock()
	h.closed = true
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.served.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// ClientCertTTL is the lifetime of the certificates the hub renews.
const ClientCertTTL = 24 * time.Hour

// renew signs a new certificate for the worker id of the channel: the
// request must be for that very node (a worker renews only itself).
func (h *Hub) renew(ca *pki.CA, id string, f peer.Frame) ([]byte, error) {
	var req worker.Renew
	if err := f.Decode(&req); err != nil {
		return nil, err
	}
	if len(req.CSRPEM) > 16<<10 {
		return nil, fmt.Errorf("certificate request of %d bytes, at most 16 KiB", len(req.CSRPEM))
	}
	return ca.SignClient([]byte(req.CSRPEM), id, ClientCertTTL, time.Now())
}

// heartbeatsPerSecond is the rate of worker heartbeats a coordinator is
// sized for: with more workers, their TTL grows (as Nomad's does), so
// that a coordinator slow to record a burst of heartbeats does not let
// live workers expire.
const heartbeatsPerSecond = 50

// ttl is how long a worker stays live after a heartbeat announcing the
// next one in intervalMS, with workers connected here: three intervals,
// at least MinWorkerTTL and workers/heartbeatsPerSecond seconds, at most
// maxWorkerTTL.
func ttl(intervalMS int64, workers int) time.Duration {
	d := 3 * time.Duration(min(max(intervalMS, 0), 1<<32)) * time.Millisecond
	scaled := time.Duration(workers) * time.Second / heartbeatsPerSecond
	return min(max(d, MinWorkerTTL, scaled), maxWorkerTTL)
}

// truncate bounds a worker-given text to n bytes of valid UTF-8.
func truncate(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
