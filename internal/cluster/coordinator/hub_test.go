package coordinator_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/cluster/coordinator"
	"github.com/kici-dev/kici/internal/cluster/join"
	"github.com/kici-dev/kici/internal/cluster/pki"
	"github.com/kici-dev/kici/internal/cluster/worker"
)

type fixedCA struct{ ca *pki.CA }

func (f fixedCA) EnsureCA(context.Context) (*pki.CA, error) { return f.ca, nil }

type touches struct {
	mu   sync.Mutex
	seen map[string]time.Duration
}

func (t *touches) TouchWorker(_ context.Context, id, _, _ string, ttl time.Duration) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen[id] = ttl
	return nil
}

func (t *touches) ttl(id string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen[id]
}

// TestWorkerConnectsBeatsAndRenews: a worker with a credential of the
// cluster's CA connects to the hub, its heartbeats are recorded under its
// certificate's node id, and a certificate near its end is renewed over
// the channel and kept in the credential file.
func TestWorkerConnectsBeatsAndRenews(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca, err := pki.NewCA("test", now)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, "worker-x")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignClient(csr, "worker-x", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := pki.NewCredential(key, certPEM, ca.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	data, err := pki.MarshalCredential(cred)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "peer-credential")
	if err := pki.SaveCredentialFile(file, data); err != nil {
		t.Fatal(err)
	}
	rec := &touches{seen: map[string]time.Duration{}}
	hub := coordinator.New(coordinator.Config{SelfID: "coord-1", CA: fixedCA{ca}, Workers: rec})
	srv := httptest.NewServer(hub)
	defer srv.Close()
	// The worker's clock is 50 minutes on: past two thirds of the hour.
	w, err := worker.New(worker.Config{CoordinatorURLs: []string{srv.URL}, CredentialFile: file, Heartbeat: 50 * time.Millisecond,
		Now: func() time.Time { return time.Now().Add(50 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		saved, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pki.LoadCredential(saved)
		if err != nil {
			t.Fatal(err)
		}
		if got.ExpiresAt().After(now.Add(20*time.Hour)) && rec.ttl("worker-x") >= coordinator.MinWorkerTTL && w.Ready() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s: credential expires %v, heartbeat ttl %v, ready %t; want a renewed 24 h certificate kept, beats recorded, ready",
				got.ExpiresAt(), rec.ttl("worker-x"), w.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := hub.Connected(); !slices.Equal(got, []string{"worker-x"}) {
		t.Errorf("hub lists %v connected, want worker-x", got)
	}
	if got := w.Connected(); !slices.Equal(got, []string{"coord-1"}) {
		t.Errorf("worker lists %v, want coord-1", got)
	}
}

// fakeJoiner admits the one token it knows, once, signing with ca.
type fakeJoiner struct {
	ca  *pki.CA
	tok pki.JoinToken
	mu  sync.Mutex
	got []string // node ids of the joins asked for
}

func (f *fakeJoiner) Join(_ context.Context, req join.JoinRequest) (join.JoinResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, req.NodeID)
	if req.TokenID != f.tok.ID || req.Secret != f.tok.Secret {
		return join.JoinResponse{}, join.ErrTokenInvalid
	}
	cert, err := f.ca.SignClient(req.CSRPEM, req.NodeID, time.Hour, time.Now())
	if err != nil {
		return join.JoinResponse{}, fmt.Errorf("%w: %w", join.ErrBadRequest, err)
	}
	return join.JoinResponse{NodeID: req.NodeID, CertificatePEM: cert, CAPEM: f.ca.CertPEM()}, nil
}

// TestWorkerJoinsInsideTheChannel: a worker without a credential checks
// the served CA against its token, then joins inside a TLS channel that
// trusts that CA alone, keeps the credential, and connects with it; a
// token with a wrong secret is refused for good.
func TestWorkerJoinsInsideTheChannel(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := pki.NewJoinToken(ca.Hash())
	if err != nil {
		t.Fatal(err)
	}
	joiner := &fakeJoiner{ca: ca, tok: tok}
	hub := coordinator.New(coordinator.Config{SelfID: "coord-1", CA: fixedCA{ca}, Workers: &touches{seen: map[string]time.Duration{}}, Joiner: joiner})
	mux := http.NewServeMux()
	mux.Handle("/ws/peer", hub)
	mux.HandleFunc(join.CAPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(ca.CertPEM()) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	bad := tok
	bad.Secret = strings.Repeat("0", 64)
	file := filepath.Join(t.TempDir(), "cred")
	w, err := worker.New(worker.Config{CoordinatorURLs: []string{srv.URL}, CredentialFile: file, JoinToken: bad.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if err := w.Run(ctx); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("join with a wrong secret: %v, want a refusal for good", err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("a refused join left a credential file")
	}

	w, err = worker.New(worker.Config{CoordinatorURLs: []string{srv.URL}, CredentialFile: file, JoinToken: tok.Encode(), Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(rctx) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(15 * time.Second)
	for !w.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("the joined worker did not connect with its credential")
		}
		time.Sleep(10 * time.Millisecond)
	}
	saved, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := pki.LoadCredential(saved)
	if err != nil || cred.NodeID() != w.NodeID() {
		t.Fatalf("kept credential: %v, node %q; want the worker's %q", err, cred.NodeID(), w.NodeID())
	}
	if got := hub.Connected(); !slices.Equal(got, []string{w.NodeID()}) {
		t.Errorf("hub lists %v, want the joined worker", got)
	}
	joiner.mu.Lock()
	defer joiner.mu.Unlock()
	if len(joiner.got) != 2 {
		t.Errorf("joins asked for: %v, want the refused one and the admitted one", joiner.got)
	}
}
