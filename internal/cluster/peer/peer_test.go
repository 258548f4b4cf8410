package peer_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/cluster/peer"
	"github.com/kici-dev/kici/internal/cluster/pki"
)

// cluster is a CA with a coordinator's serving certificate.
type cluster struct {
	ca   *pki.CA
	cert *tls.Certificate
}

func newCluster(t *testing.T, name string) *cluster {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA(name, now)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignServer(key.Public(), []string{peer.CoordinatorServerName}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{ca: ca, cert: &cert}
}

// worker returns a credential of node id from the cluster's CA.
func (c *cluster) worker(t *testing.T, id string) *pki.Credential {
	t.Helper()
	key, err := pki.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, id)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := c.ca.SignClient(csr, id, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cred, err := pki.NewCredential(key, certPEM, c.ca.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// coordinator serves /ws/peer: each accepted connection echoes "echo"
// requests, answers "fail" with an error and leaves "ignore" unanswered.
type coordinator struct {
	url      string
	mu       sync.Mutex
	accepted []string // peer ids
	refused  []error
	ended    []error
	endedCh  chan struct{}
}

func serve(t *testing.T, c *cluster, cfg peer.ServerConfig) *coordinator {
	t.Helper()
	cfg.CA = c.ca.Certificate()
	cfg.Certificate = func() (*tls.Certificate, error) { return c.cert, nil }
	cfg.SelfID = "coord-1"
	co := &coordinator{endedCh: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := peer.Accept(w, r, cfg)
		co.mu.Lock()
		if err != nil {
			co.refused = append(co.refused, err)
			co.mu.Unlock()
			return
		}
		co.accepted = append(co.accepted, conn.PeerID())
		co.mu.Unlock()
		err = conn.Run(context.Background(), func(ctx context.Context, f peer.Frame) {
			switch f.Type {
			case "echo":
				var s string
				_ = f.Decode(&s)
				_ = conn.Reply(ctx, f, conn.PeerID()+":"+s, nil)
			case "fail":
				_ = conn.Reply(ctx, f, nil, errors.New("not allowed here"))
			}
		})
		co.mu.Lock()
		co.ended = append(co.ended, err)
		co.mu.Unlock()
		co.endedCh <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	co.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	return co
}

func dial(t *testing.T, url string, cfg peer.ClientConfig) (*peer.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := peer.Dial(ctx, url, cfg)
	if err == nil {
		t.Cleanup(func() { c.Close() })
		go func() { _ = c.Run(context.Background(), func(context.Context, peer.Frame) {}) }()
	}
	return c, err
}

func TestMutualTLSChannel(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "prod")
	co := serve(t, cl, peer.ServerConfig{})
	c, err := dial(t, co.url, peer.ClientConfig{CA: cl.ca.Certificate(), Credential: cl.worker(t, "worker-1")})
	if err != nil {
		t.Fatal(err)
	}
	if c.PeerID() != "coord-1" {
		t.Errorf("worker sees coordinator %q, want coord-1", c.PeerID())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	f, err := c.Request(ctx, "echo", "hi")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := f.Decode(&got); err != nil || got != "worker-1:hi" {
		t.Errorf("echo: %q (%v), want the coordinator to know the worker by its certificate: worker-1:hi", got, err)
	}
	_, err = c.Request(ctx, "fail", nil)
	var remote *peer.RemoteError
	if !errors.As(err, &remote) || remote.Message != "not allowed here" {
		t.Errorf("refused request: %v, want a RemoteError with the coordinator's reason", err)
	}
	// An unanswered request ends with the caller's deadline.
	short, cancel2 := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel2()
	if _, err := c.Request(short, "ignore", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unanswered request: %v, want the deadline", err)
	}
	// A pending request fails at once when the connection ends.
	errc := make(chan error, 1)
	go func() { _, err := c.Request(t.Context(), "ignore", nil); errc <- err }()
	time.Sleep(20 * time.Millisecond) // let it be sent; the close below must still end it
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, peer.ErrClosed) {
			t.Errorf("pending request after close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pending request not ended by the close")
	}
}

func TestChannelRefusesStrangers(t *testing.T) {
	t.Parallel()
	cl, other := newCluster(t, "prod"), newCluster(t, "prod")
	co := serve(t, cl, peer.ServerConfig{})
	joinable := serve(t, cl, peer.ServerConfig{AllowJoin: true})
	tests := []struct {
		name string
		url  string
		cfg  peer.ClientConfig
		ok   bool
	}{
		{"certificate of another CA", co.url, peer.ClientConfig{CA: cl.ca.Certificate(), Credential: other.worker(t, "w")}, false},
		{"no certificate", co.url, peer.ClientConfig{CA: cl.ca.Certificate()}, false},
		{"worker pinning another CA", co.url, peer.ClientConfig{CA: other.ca.Certificate(), Credential: other.worker(t, "w")}, false},
		{"no certificate where joins are allowed", joinable.url, peer.ClientConfig{CA: cl.ca.Certificate()}, true},
		{"certificate of another CA where joins are allowed", joinable.url, peer.ClientConfig{CA: cl.ca.Certificate(), Credential: other.worker(t, "w")}, false},
	}
	for _, tt := range tests {
		c, err := dial(t, tt.url, tt.cfg)
		if tt.ok != (err == nil) {
			t.Errorf("%s: dial error %v, want ok=%t", tt.name, err, tt.ok)
			continue
		}
		if tt.ok && c.PeerID() != "coord-1" {
			t.Errorf("%s: coordinator %q", tt.name, c.PeerID())
		}
	}
	joinable.mu.Lock()
	defer joinable.mu.Unlock()
	if len(joinable.accepted) != 1 || joinable.accepted[0] != "" {
		t.Errorf("joinable coordinator accepted %q, want one peer without identity", joinable.accepted)
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if len(co.accepted) != 0 {
		t.Errorf("coordinator accepted %q, want nobody", co.accepted)
	}
}

func TestIdlePeerIsDropped(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "prod")
	co := serve(t, cl, peer.ServerConfig{Config: peer.Config{IdleTimeout: 300 * time.Millisecond}})
	if _, err := dial(t, co.url, peer.ClientConfig{CA: cl.ca.Certificate(), Credential: cl.worker(t, "quiet"),
		Config: peer.Config{IdleTimeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-co.endedCh:
	case <-time.After(10 * time.Second):
		t.Fatal("a silent peer was not dropped")
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if err := co.ended[0]; err == nil || !strings.Contains(err.Error(), "nothing received") {
		t.Errorf("connection ended with %v, want the idle timeout", err)
	}
}

// TestAnswerBeforeCloseWins: a peer that answers a request and closes the
// connection at once (the coordinator after a join) gives the requester
// the answer, not ErrClosed, every time.
func TestAnswerBeforeCloseWins(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "prod")
	cfg := peer.ServerConfig{CA: cl.ca.Certificate(), Certificate: func() (*tls.Certificate, error) { return cl.cert, nil }, SelfID: "coord-1"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := peer.Accept(w, r, cfg)
		if err != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_ = conn.Run(ctx, func(ctx context.Context, f peer.Frame) {
			_ = conn.Reply(ctx, f, "bye", nil)
			cancel() // and close at once
		})
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	cred := cl.worker(t, "w")
	for i := range 50 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		c, err := peer.Dial(ctx, url, peer.ClientConfig{CA: cl.ca.Certificate(), Credential: cred})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		go func() { _ = c.Run(ctx, func(context.Context, peer.Frame) {}) }()
		f, err := c.Request(ctx, "last", nil)
		var got string
		if err == nil {
			err = f.Decode(&got)
		}
		c.Close()
		cancel()
		if err != nil || got != "bye" {
			t.Fatalf("request %d: %q, %v; want the answer sent before the close", i, got, err)
		}
	}
}
