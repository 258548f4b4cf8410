package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/kici-dev/kici/internal/cluster/pki"
)

// CoordinatorServerName is the name every coordinator's certificate is
// issued for and every worker checks: a worker reaches coordinators under
// whatever URLs, and trusts any that proves to be one of its cluster's.
const CoordinatorServerName = "coordinator.kici.cluster"

// handshakeTimeout bounds the TLS handshake inside the WebSocket.
const handshakeTimeout = 15 * time.Second

// ServerConfig is what a coordinator accepts peers with.
type ServerConfig struct {
	Config
	// SelfID is the coordinator's instance id, told to each peer in the
	// welcome frame.
	SelfID string
	// CA is the cluster CA: client certificates must chain to it alone.
	CA *x509.Certificate
	// Certificate returns the coordinator's current serving certificate
	// (for CoordinatorServerName, from CA).
	Certificate func() (*tls.Certificate, error)
	// AllowJoin accepts a client without a certificate, whose connection
	// has an empty PeerID and may only ask to join.
	AllowJoin bool
	// Admit, when set, decides on a client with a valid certificate
	// before it is welcomed: an error closes the connection, and the
	// client's Dial fails, so it never counts itself connected.
	Admit func(ctx context.Context, peerID string) error
}

// ClientConfig is what a worker dials a coordinator with.
type ClientConfig struct {
	Config
	// CA is the cluster CA, the only root the worker trusts.
	CA *x509.Certificate
	// Credential is the worker's key and certificate; nil to join.
	Credential *pki.Credential
}

// Accept upgrades an HTTP request on /ws/peer and completes the TLS
// handshake inside it. The returned connection lives until it is closed
// or fails, not with r's context.
func Accept(w http.ResponseWriter, r *http.Request, cfg ServerConfig) (*Conn, error) {
	if cfg.CA == nil || cfg.Certificate == nil {
		return nil, errors.New("accept peer: no cluster CA or serving certificate")
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, fmt.Errorf("accept peer: %w", err)
	}
	ws.SetReadLimit(MaxFrame + 64<<10) // a TLS record's overhead on top of a frame
	nc := websocket.NetConn(context.WithoutCancel(r.Context()), ws, websocket.MessageBinary)
	tc := tls.Server(nc, serverTLS(cfg))
	ctx, cancel := context.WithTimeout(r.Context(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("accept peer from %s: TLS handshake: %w", r.RemoteAddr, err)
	}
	id := ""
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		if id, err = pki.NodeIDOf(certs[0]); err != nil {
			_ = tc.Close()
			return nil, fmt.Errorf("accept peer from %s: %w", r.RemoteAddr, err)
		}
	}
	if id != "" && cfg.Admit != nil {
		if err := cfg.Admit(r.Context(), id); err != nil {
			_ = tc.Close()
			return nil, fmt.Errorf("accept peer %s from %s: %w", id, r.RemoteAddr, err)
		}
	}
	c := newConn(tc, id, cfg.Config)
	// The welcome tells the client its certificate was accepted (a TLS
	// 1.3 client finishes its handshake before the server checks it).
	wctx, cancel2 := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel2()
	if err := c.Send(wctx, TypeWelcome, Welcome{NodeID: cfg.SelfID, PeerID: id}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("accept peer from %s: %w", r.RemoteAddr, err)
	}
	return c, nil
}

// TypeWelcome is the first frame of every connection, from the
// coordinator.
const TypeWelcome = "peer.welcome"

// Welcome is the body of the first frame.
type Welcome struct {
	// NodeID is the coordinator's instance id.
	NodeID string `json:"node_id"`
	// PeerID is the node id the coordinator read from the client's
	// certificate; empty for a client joining.
	PeerID string `json:"peer_id,omitempty"`
}

// serverTLS is pki.ServerTLS with the certificate read at each handshake
// (so a renewal applies to the next connection) and, with AllowJoin, a
// client certificate optional: one that is given is still verified.
func serverTLS(cfg ServerConfig) *tls.Config {
	base := pki.ServerTLS(cfg.CA, tls.Certificate{})
	base.Certificates = nil
	base.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cfg.Certificate() }
	if cfg.AllowJoin {
		verify := base.VerifyConnection
		base.ClientAuth = tls.VerifyClientCertIfGiven
		base.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil // a worker joining
			}
			return verify(cs)
		}
	}
	return base
}

// Dial connects to a coordinator's /ws/peer at url (ws:// or wss://) and
// completes the TLS handshake inside: the coordinator must prove to hold
// a certificate for CoordinatorServerName from cfg.CA.
func Dial(ctx context.Context, url string, cfg ClientConfig) (*Conn, error) {
	if cfg.CA == nil {
		return nil, errors.New("dial peer: no cluster CA")
	}
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial peer %s: %w", url, err)
	}
	ws.SetReadLimit(MaxFrame + 64<<10)
	nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	tc := tls.Client(nc, pki.ClientTLS(cfg.CA, cfg.Credential, CoordinatorServerName))
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("dial peer %s: TLS handshake: %w", url, err)
	}
	// A TLS 1.3 server refuses the client's certificate only after the
	// client's handshake returned: the coordinator's welcome confirms the
	// channel (a refusal arrives as the read's error).
	c := newConn(tc, "", cfg.Config)
	_ = tc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	f, err := c.read(make([]byte, 4))
	if err == nil && f.Type != TypeWelcome {
		err = fmt.Errorf("first frame %q, want %s", f.Type, TypeWelcome)
	}
	var w Welcome
	if err == nil {
		err = f.Decode(&w)
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("dial peer %s: not accepted: %w", url, err)
	}
	c.peerID = w.NodeID
	return c, nil
}
