package coordinator_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/cluster/coordinator"
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
