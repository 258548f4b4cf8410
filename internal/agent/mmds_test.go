package agent

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// mmdsServer is a test stand-in for Firecracker's metadata service: the
// v2 flow (a PUT for a session token, then GETs that must carry it).
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
