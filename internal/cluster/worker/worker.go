// Package worker is the database-less side of a kici cluster: a worker
// joins the cluster once with a join token, keeps the credential it got
// in a file, and from then on holds a channel (internal/cluster/peer) to
// every coordinator it is given, sending heartbeats with what it offers.
// It is ready while at least one channel is up.
//
// Agents that connect to the worker are relayed to a coordinator (see
// ServeAgent). A worker may also run scalers: coordinators route queued
// jobs they cannot place to them (scaler.go), and what the spawns report
// reaches the coordinators through a durable outbox.
//
// A *Worker is safe for concurrent use; Run is called once. Only the
// orchestrator binary imports this package.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kici-dev/kici/internal/cluster/join"
	"github.com/kici-dev/kici/internal/cluster/outbox"
	"github.com/kici-dev/kici/internal/cluster/peer"
	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/scaler"
)

// errJoinRefused marks a join refused for good: another try with the same
// token cannot succeed.
var errJoinRefused = errors.New("join refused")

// newStreamID names a relayed agent stream.
func newStreamID() string { return "a-" + uuid.NewString() }

// TypeHeartbeat is the worker's heartbeat frame.
const TypeHeartbeat = "peer.heartbeat"

// TypeHeartbeatAck is the coordinator's answer to each heartbeat, a
// notice with no body: it keeps the worker's side of a quiet channel from
// timing out (the worker drops a channel silent for three heartbeats).
const TypeHeartbeatAck = "peer.heartbeat.ack"

// DefaultHeartbeat is how often a worker sends its heartbeat, and
// MaxHeartbeat the longest interval allowed: coordinators drop a channel
// silent for three of those.
const (
	DefaultHeartbeat = 5 * time.Second
	MaxHeartbeat     = 20 * time.Second
)

// TypeRenew asks the coordinator for a new certificate: a Renew body,
// answered with a Renewed.
const TypeRenew = "peer.renew"

// Renew is a certificate request for the worker's own node id and key.
type Renew struct {
	CSRPEM string `json:"csr_pem"`
}

// Renewed is a renewed certificate.
type Renewed struct {
	CertificatePEM string `json:"certificate_pem"`
}

// TypeJoin is a worker's first join, the only request a connection
// without a certificate may make: a Join body, answered with a Joined.
// It travels inside the TLS channel, whose coordinator proved a
// certificate of the CA the token pins, so the secret is never exposed
// to anyone else, whatever the URL's scheme.
const TypeJoin = "peer.join"

// Join is a first join's request.
type Join struct {
	TokenID string `json:"token_id"`
	Secret  string `json:"secret"`
	NodeID  string `json:"node_id"`
	CSRPEM  string `json:"csr_pem"`
}

// Joined is the answer to a Join: an admitted worker's certificate, or
// why it was refused and whether trying again may help (a coordinator
// that cannot reach its database) or not (a token unknown, spent,
// expired or revoked, or a request it will not sign).
type Joined struct {
	CertificatePEM string `json:"certificate_pem,omitempty"`
	Refused        string `json:"refused,omitempty"`
	Retry          bool   `json:"retry,omitempty"`
}

// Heartbeat is the body of a heartbeat: who the worker is and what it
// offers. IntervalMS tells the coordinator when to expect the next one.
type Heartbeat struct {
	NodeID     string `json:"node_id"`
	Hostname   string `json:"hostname,omitempty"`
	Version    string `json:"version,omitempty"`
	IntervalMS int64  `json:"interval_ms"`
	// Agents is how many agents are connected to the worker.
	Agents int `json:"agents"`
	// Scalers are the worker's scalers a coordinator may route a queued
	// job to, and ScalerAgents the agents they are spawning or run (so a
	// coordinator knows which worker checks a registering one's token).
	Scalers      []scaler.Offer `json:"scalers,omitempty"`
	ScalerAgents []string       `json:"scaler_agents,omitempty"`
	// OutboxDepth is how many entries the worker's outbox holds.
	OutboxDepth int `json:"outbox_depth,omitempty"`
}

// Config configures a Worker.
type Config struct {
	// CoordinatorURLs are the coordinators' base URLs (http:// or
	// https://); the worker holds a channel to each.
	CoordinatorURLs []string
	// JoinToken is needed only when CredentialFile does not exist yet.
	JoinToken string
	// CredentialFile holds the worker's key and certificate (mode 0600).
	CredentialFile string
	// Heartbeat is the heartbeat interval; 0 means DefaultHeartbeat.
	Heartbeat time.Duration
	// HTTPClient makes the first join; nil means http.DefaultClient.
	HTTPClient *http.Client
	Version    string
	Log        *slog.Logger
	// Now is the clock that decides when the certificate is renewed; nil
	// means time.Now.
	Now func() time.Time
	// IsolationLimit is how long the worker may be cut from every
	// coordinator before it calls OnIsolated (once per isolation); 0 means
	// never.
	IsolationLimit time.Duration
	// OnIsolated stops what the worker runs on its own: by then the
	// coordinators have failed its agents' jobs as lost.
	OnIsolated func()
}

// Worker is a running worker.
type Worker struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	cred *pki.Credential
	// renewMu makes one renewal at a time across the channels.
	renewMu  sync.Mutex
	up       map[string]string   // coordinator URL -> coordinator id, while connected
	sessions map[string]*session // by coordinator URL, while connected
	scalers  Scalers             // nil: the worker runs no scaler
	outbox   *outbox.Outbox
	wake     chan struct{} // a new outbox entry or channel
}

// New checks cfg and returns a Worker.
func New(cfg Config) (*Worker, error) {
	if len(cfg.CoordinatorURLs) == 0 {
		return nil, errors.New("worker: no coordinator URL (KICI_CLUSTER_COORDINATOR_URLS)")
	}
	for _, u := range cfg.CoordinatorURLs {
		if _, err := peerURL(u); err != nil {
			return nil, err
		}
	}
	if cfg.CredentialFile == "" {
		return nil, errors.New("worker: no credential file")
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Heartbeat > MaxHeartbeat {
		return nil, fmt.Errorf("worker: heartbeat every %s: at most %s", cfg.Heartbeat, MaxHeartbeat)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Worker{cfg: cfg, log: cfg.Log, up: map[string]string{}, sessions: map[string]*session{}, wake: make(chan struct{}, 1)}, nil
}

// peerURL is the /ws/peer URL of a coordinator's base URL.
func peerURL(base string) (string, error) {
	b := strings.TrimRight(base, "/")
	switch {
	case strings.HasPrefix(b, "http://"):
		return "ws://" + strings.TrimPrefix(b, "http://") + "/ws/peer", nil
	case strings.HasPrefix(b, "https://"):
		return "wss://" + strings.TrimPrefix(b, "https://") + "/ws/peer", nil
	}
	return "", fmt.Errorf("worker: coordinator URL %q: want http:// or https://", base)
}

// Ready reports whether the worker holds a channel to a coordinator.
func (w *Worker) Ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.up) > 0
}

// Connected returns the ids of the coordinators the worker is connected
// to, sorted.
func (w *Worker) Connected() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, id := range w.up {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// NodeID is the worker's node id, once it has a credential.
func (w *Worker) NodeID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cred == nil {
		return ""
	}
	return w.cred.NodeID()
}

// Run loads the credential (joining first if there is none), then keeps
// a channel to every coordinator until ctx ends. It returns early only
// when the worker cannot get a credential: a join the coordinators refuse
// for good, or a CA that does not match the token.
func (w *Worker) Run(ctx context.Context) error {
	cred, err := w.credential(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.cred = cred
	w.mu.Unlock()
	w.log.Info("worker credential loaded", "node_id", cred.NodeID(), "expires", cred.ExpiresAt())
	var wg sync.WaitGroup
	wg.Go(func() { w.relayOutbox(ctx) })
	if w.cfg.IsolationLimit > 0 && w.cfg.OnIsolated != nil {
		wg.Go(func() { w.watchIsolation(ctx) })
	}
	for _, u := range w.cfg.CoordinatorURLs {
		wg.Go(func() { w.keep(ctx, u, cred) })
	}
	wg.Wait()
	return nil
}

// credential reads the credential file, or joins the cluster with the
// join token and writes it.
func (w *Worker) credential(ctx context.Context) (*pki.Credential, error) {
	data, err := os.ReadFile(w.cfg.CredentialFile)
	if err == nil {
		cred, err := pki.LoadCredential(data)
		if err != nil {
			return nil, fmt.Errorf("worker credential %s: %w", w.cfg.CredentialFile, err)
		}
		return cred, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("worker credential: %w", err)
	}
	if w.cfg.JoinToken == "" {
		return nil, fmt.Errorf("worker: no credential in %s and no join token (KICI_CLUSTER_JOIN_TOKEN) to get one", w.cfg.CredentialFile)
	}
	tok, err := pki.ParseJoinToken(w.cfg.JoinToken)
	if err != nil {
		return nil, fmt.Errorf("worker: KICI_CLUSTER_JOIN_TOKEN: %w", err)
	}
	nodeID := "worker-" + uuid.NewString()
	backoff := 500 * time.Millisecond
	for {
		var errs []error
		for _, u := range w.cfg.CoordinatorURLs {
			cred, err := w.join(ctx, u, tok, nodeID)
			if err == nil {
				data, err := pki.MarshalCredential(cred)
				if err == nil {
					err = pki.SaveCredentialFile(w.cfg.CredentialFile, data)
				}
				if err != nil {
					return nil, fmt.Errorf("worker: keep the credential: %w", err)
				}
				w.log.Info("joined the cluster", "coordinator", u, "node_id", nodeID)
				return cred, nil
			}
			if errors.Is(err, pki.ErrCAMismatch) || errors.Is(err, errJoinRefused) {
				return nil, fmt.Errorf("worker: %w", err)
			}
			errs = append(errs, err)
		}
		w.log.Warn("no coordinator took the join yet; trying again", "error", errors.Join(errs...), "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// join makes the first join at the coordinator at base: it checks the
// CA the coordinator serves against the token, opens a channel that
// trusts that CA alone, and sends the token's secret with a certificate
// request inside it.
func (w *Worker) join(ctx context.Context, base string, tok pki.JoinToken, nodeID string) (*pki.Credential, error) {
	ca, err := join.FetchVerifiedCA(ctx, w.cfg.HTTPClient, base, tok)
	if err != nil {
		return nil, err
	}
	key, err := pki.NewNodeKey()
	if err != nil {
		return nil, err
	}
	csr, err := pki.NewCSR(key, nodeID)
	if err != nil {
		return nil, err
	}
	url, _ := peerURL(base)
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := peer.Dial(jctx, url, peer.ClientConfig{CA: ca})
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s: %w", base, err)
	}
	defer c.Close()
	go func() { _ = c.Run(jctx, func(context.Context, peer.Frame) {}) }()
	f, err := c.Request(jctx, TypeJoin, Join{TokenID: tok.ID, Secret: tok.Secret, NodeID: nodeID, CSRPEM: string(csr)})
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s: %w", base, err)
	}
	var j Joined
	if err := f.Decode(&j); err != nil {
		return nil, fmt.Errorf("join cluster at %s: %w", base, err)
	}
	if j.Refused != "" {
		err := fmt.Errorf("join cluster at %s: the coordinator refused: %s", base, j.Refused)
		if !j.Retry {
			err = fmt.Errorf("%w: %w", errJoinRefused, err)
		}
		return nil, err
	}
	cred, err := pki.NewCredential(key, []byte(j.CertificatePEM), ca)
	if err != nil {
		return nil, fmt.Errorf("join cluster at %s as node %q: %w", base, nodeID, err)
	}
	return cred, nil
}

// keep holds a channel to the coordinator at base until ctx ends,
// reconnecting with backoff.
func (w *Worker) keep(ctx context.Context, base string, cred *pki.Credential) {
	url, _ := peerURL(base)
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		c, err := peer.Dial(dctx, url, peer.ClientConfig{CA: cred.CA(), Credential: cred,
			Config: peer.Config{IdleTimeout: 3 * w.cfg.Heartbeat}})
		cancel()
		if err == nil {
			backoff = 200 * time.Millisecond
			w.session(ctx, base, c)
		} else if ctx.Err() == nil {
			w.log.Warn("coordinator not reachable", "coordinator", base, "error", err)
		}
		// Jitter spreads the reconnects of many workers after an outage.
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// session runs one channel to a coordinator until it ends.
func (w *Worker) session(ctx context.Context, base string, c *peer.Conn) {
	s := &session{base: base, conn: c, agents: map[string]*agentStream{}, scalerSem: make(chan struct{}, maxScalerRequests)}
	w.mu.Lock()
	w.up[base] = c.PeerID()
	w.sessions[base] = s
	w.mu.Unlock()
	select { // what waits in the outbox goes out on the new channel
	case w.wake <- struct{}{}:
	default:
	}
	w.log.Info("connected to coordinator", "coordinator", base, "coordinator_id", c.PeerID())
	defer func() {
		w.mu.Lock()
		delete(w.up, base)
		delete(w.sessions, base)
		w.mu.Unlock()
		s.end()
	}()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go w.beat(sctx, c)
	err := c.Run(sctx, func(ctx context.Context, f peer.Frame) {
		if s.handle(f) || w.handleScaler(ctx, s, f) {
			return
		}
		if f.ID != "" { // a request this worker does not handle yet: say so
			_ = c.Reply(ctx, f, nil, fmt.Errorf("%s is not handled by this worker", f.Type))
		}
	})
	if ctx.Err() == nil {
		w.log.Warn("coordinator channel ended", "coordinator", base, "error", err)
	}
}

// beat sends a heartbeat at once and then every interval.
func (w *Worker) beat(ctx context.Context, c *peer.Conn) {
	host, _ := os.Hostname()
	t := time.NewTicker(w.cfg.Heartbeat)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, w.cfg.Heartbeat)
		hb := Heartbeat{NodeID: w.NodeID(), Hostname: host, Version: w.cfg.Version, IntervalMS: w.cfg.Heartbeat.Milliseconds()}
		w.inventory(&hb)
		err := c.Send(sctx, TypeHeartbeat, hb)
		cancel()
		if err != nil {
			return
		}
		if w.cred.NeedsRenewal(w.cfg.Now()) {
			w.renew(ctx, c)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.Done():
			return
		case <-t.C:
		}
	}
}

// renew asks the coordinator at the other end of c for a new certificate
// of the same key and node, and keeps it. A failure is tried again at the
// next heartbeat; the current certificate stays until it expires.
func (w *Worker) renew(ctx context.Context, c *peer.Conn) {
	w.renewMu.Lock()
	defer w.renewMu.Unlock()
	if !w.cred.NeedsRenewal(w.cfg.Now()) {
		return // another channel renewed it meanwhile
	}
	err := func() error {
		csr, err := w.cred.NewCSR()
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		f, err := c.Request(rctx, TypeRenew, Renew{CSRPEM: string(csr)})
		if err != nil {
			return err
		}
		var r Renewed
		if err := f.Decode(&r); err != nil {
			return err
		}
		if err := w.cred.Replace([]byte(r.CertificatePEM)); err != nil {
			return err
		}
		data, err := pki.MarshalCredential(w.cred)
		if err != nil {
			return err
		}
		return pki.SaveCredentialFile(w.cfg.CredentialFile, data)
	}()
	if err != nil {
		w.log.Warn("certificate renewal failed; trying again at the next heartbeat", "coordinator_id", c.PeerID(),
			"expires", w.cred.ExpiresAt(), "error", err)
		return
	}
	w.log.Info("certificate renewed", "coordinator_id", c.PeerID(), "expires", w.cred.ExpiresAt())
}

// watchIsolation calls OnIsolated once the worker has had no channel to
// any coordinator for IsolationLimit, and again only after a channel came
// back and was lost for that long once more.
func (w *Worker) watchIsolation(ctx context.Context) {
	tick := min(time.Second, w.cfg.IsolationLimit/4)
	t := time.NewTicker(tick)
	defer t.Stop()
	since := time.Now() // isolated since (before the first channel too)
	acted := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.Ready() {
			since, acted = time.Now(), false
			continue
		}
		if !acted && time.Since(since) >= w.cfg.IsolationLimit {
			acted = true
			w.log.Warn("cut from every coordinator for too long; stopping what this worker runs", "for", time.Since(since).Round(time.Second), "limit", w.cfg.IsolationLimit)
			w.cfg.OnIsolated()
		}
	}
}
