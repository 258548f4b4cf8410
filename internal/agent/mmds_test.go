package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/fcguest"
)

// mmdsServer is a test stand-in for Firecracker's metadata service: the
// v2 flow (a PUT for a session token, then GETs that must carry it). doc
// may be a func() any, called for each GET.
func mmdsServer(t *testing.T, doc any, notReady int32) *httptest.Server {
	t.Helper()
	var misses atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			if r.Header.Get("X-metadata-token-ttl-seconds") == "" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte("tok-1"))
		case r.Method == http.MethodGet && r.URL.Path == "/latest/meta-data":
			if r.Header.Get("X-metadata-token") != "tok-1" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			if misses.Add(1) <= notReady {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			if f, ok := doc.(func() any); ok {
				_ = json.NewEncoder(w).Encode(f())
				return
			}
			_ = json.NewEncoder(w).Encode(doc)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestApplyMMDS(t *testing.T) {
	srv := mmdsServer(t, map[string]any{
		"kici-orchestrator-url": "ws://10.0.0.1:4000/ws",
		"kici-agent-id":         "scaler-firecracker-0a1b2c3d",
		"kici-labels":           "linux,fc",
		"kici-agent-token":      "kst_abc",
		"kici-scaler-managed":   "1",
		"kici-env":              map[string]any{"GOFLAGS": "-mod=mod", "KICI_AGENT_ID": "from-env-loses"},
	}, 2)
	t.Setenv(EnvMMDSURL, srv.URL)
	for _, k := range []string{"KICI_ORCHESTRATOR_URL", "KICI_AGENT_ID", "KICI_LABELS", "KICI_AGENT_TOKEN", "KICI_AGENT_SCALER", "KICI_AGENT_ONE_SHOT", "GOFLAGS"} {
		t.Setenv(k, "")
	}
	if err := ApplyMMDS(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"KICI_ORCHESTRATOR_URL": "ws://10.0.0.1:4000/ws", "KICI_AGENT_ID": "scaler-firecracker-0a1b2c3d",
		"KICI_LABELS": "linux,fc", "KICI_AGENT_TOKEN": "kst_abc", "KICI_AGENT_SCALER": "true",
		"KICI_AGENT_ONE_SHOT": "true", "GOFLAGS": "-mod=mod",
	}
	for k, v := range want {
		if got := os.Getenv(k); got != v {
			t.Errorf("%s: got %q, want %q", k, got, v)
		}
	}
	if _, set := os.LookupEnv(EnvMMDSURL); set {
		t.Errorf("%s still set: the token-hiding re-exec would read MMDS again", EnvMMDSURL)
	}
}

func TestApplyMMDSRefusesBadDocuments(t *testing.T) {
	for name, doc := range map[string]any{
		"no url":          map[string]any{"kici-agent-id": "x"},
		"number":          map[string]any{"kici-orchestrator-url": 3},
		"bad env name":    map[string]any{"kici-orchestrator-url": "ws://h/ws", "kici-env": map[string]any{"A-B": "x"}},
		"env not strings": map[string]any{"kici-orchestrator-url": "ws://h/ws", "kici-env": map[string]any{"A": 1}},
		"not an object":   []string{"x"},
		"too large":       map[string]any{"kici-orchestrator-url": "ws://h/ws", "pad": strings.Repeat("x", maxMMDSBytes)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvMMDSURL, mmdsServer(t, doc, 0).URL)
			if err := ApplyMMDS(t.Context()); err == nil {
				t.Fatal("got nil, want an error")
			}
		})
	}
	t.Run("not http", func(t *testing.T) {
		t.Setenv(EnvMMDSURL, "file:///etc/passwd")
		if err := ApplyMMDS(t.Context()); err == nil || !strings.Contains(err.Error(), "want http://") {
			t.Fatalf("got %v", err)
		}
	})
}

// markerWriter closes ready when a line with the ready marker is written.
type markerWriter struct {
	ready chan struct{}
	lines atomic.Int32
}

func (m *markerWriter) Write(p []byte) (int, error) {
	if strings.TrimSpace(string(p)) == fcguest.ReadyMarker && m.lines.Add(1) == 1 {
		close(m.ready)
	}
	return len(p), nil
}

// TestApplyMMDSWaitsAsATemplate: a template VM's agent prints the marker
// once and waits until the host hands it an identity, then configures
// itself from it.
func TestApplyMMDSWaitsAsATemplate(t *testing.T) {
	var identity atomic.Bool
	srv := mmdsServer(t, func() any {
		if !identity.Load() {
			return map[string]any{fcguest.TemplateKey: "1"}
		}
		return map[string]any{"kici-orchestrator-url": "ws://10.0.0.1:4000/ws", "kici-agent-id": "scaler-firecracker-00000001", "kici-scaler-managed": "1"}
	}, 1)
	t.Setenv(EnvMMDSURL, srv.URL)
	t.Setenv("KICI_ORCHESTRATOR_URL", "")
	t.Setenv("KICI_AGENT_ID", "")
	w := &markerWriter{ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- applyMMDS(t.Context(), w) }()
	select {
	case <-w.ready:
	case err := <-done:
		t.Fatalf("returned %v before it printed the ready marker", err)
	}
	select {
	case err := <-done:
		t.Fatalf("returned %v without an identity", err)
	case <-time.After(50 * time.Millisecond):
	}
	identity.Store(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.lines.Load() != 1 {
		t.Errorf("marker printed %d times, want once", w.lines.Load())
	}
	if got := os.Getenv("KICI_AGENT_ID"); got != "scaler-firecracker-00000001" {
		t.Errorf("KICI_AGENT_ID %q after the identity came", got)
	}
}

// TestApplyMMDSRefusesABadNetwork: a kici-network value that is not a
// usable interface configuration fails before anything is configured.
func TestApplyMMDSRefusesABadNetwork(t *testing.T) {
	for name, n := range map[string]any{
		"not an object": "10.0.0.7/24",
		"bad gateway":   map[string]any{"interface": "eth0", "address": "10.0.0.7/24", "gateway": "192.168.0.1", "mac": "06:00:AC:00:00:07"},
		"bad interface": map[string]any{"interface": "../eth0", "address": "10.0.0.7/24", "gateway": "10.0.0.1", "mac": "06:00:AC:00:00:07"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvMMDSURL, mmdsServer(t, map[string]any{"kici-orchestrator-url": "ws://h/ws", fcguest.NetworkKey: n}, 0).URL)
			err := applyMMDS(t.Context(), io.Discard)
			if err == nil || !strings.Contains(err.Error(), fcguest.NetworkKey) {
				t.Fatalf("got %v, want an error naming %s", err, fcguest.NetworkKey)
			}
		})
	}
}
