package join

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/secrets"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/testsvc"
)

// testClock is the clock of a test's stores and services, moved by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now().UTC().Truncate(time.Second)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// engine is one database engine; url returns the DatabaseURL of a fresh
// database ("" for SQLite in dir).
type engine struct {
	name string
	url  func(t *testing.T) string
}

var engines = []engine{
	{name: "sqlite", url: func(*testing.T) string { return "" }},
	{name: "postgres", url: func(t *testing.T) string { return testsvc.PostgresURL(t) }},
}

// forEachEngine runs fn as a parallel subtest per engine, with a fresh
// database that fn may open as often as it likes (open) and the clock
// every handle uses.
func forEachEngine(t *testing.T, fn func(t *testing.T, open func() *store.DB, clock *testClock)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			cfg := store.Config{DataDir: t.TempDir(), DatabaseURL: e.url(t), MaxConns: 4, Logger: testLogger(t)}
			clock := newTestClock()
			cfg.Now = clock.now
			var once sync.Once
			open := func() *store.DB {
				db, err := store.Open(t.Context(), cfg)
				if err != nil {
					t.Fatalf("open %s: %v", e.name, err)
				}
				t.Cleanup(func() { db.Close() })
				once.Do(func() {
					if err := db.Migrate(t.Context()); err != nil {
						t.Fatalf("migrate %s: %v", e.name, err)
					}
				})
				return db
			}
			fn(t, open, clock)
		})
	}
}

// testSecretKey is the secret key of every test service.
var testSecretKey = secrets.GenerateKey()

// newService builds a Service on db, sealing with a secrets service on
// the test key, on clock.
func newService(t *testing.T, db *store.DB, clock *testClock) *Service {
	t.Helper()
	sealer, err := secrets.Open(t.Context(), testLogger(t), db, secrets.KeyConfig{Env: testSecretKey.Hex()})
	if err != nil {
		t.Fatalf("open secrets: %v", err)
	}
	svc := New(db, sealer, testLogger(t).With("component", "join"))
	svc.now = clock.now
	return svc
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testCoordinator is a coordinator's two join routes on 127.0.0.1, in
// front of a real Service, counting the join requests that reach it.
type testCoordinator struct {
	srv   *httptest.Server
	joins atomic.Int64
}

// startCoordinator serves svc's join routes the way the api package does,
// reduced to what a joining worker sees.
func startCoordinator(t *testing.T, svc *Service) *testCoordinator {
	t.Helper()
	c := &testCoordinator{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CAPath, func(w http.ResponseWriter, r *http.Request) {
		pem, err := svc.CACertPEM(r.Context())
		if err != nil {
			writeTestError(w, http.StatusNotFound, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(pem)
	})
	mux.HandleFunc("POST "+JoinPath, func(w http.ResponseWriter, r *http.Request) {
		c.joins.Add(1)
		var in apiv1.ClusterJoinRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&in); err != nil {
			writeTestError(w, http.StatusBadRequest, err)
			return
		}
		out, err := svc.Join(r.Context(), JoinRequest{TokenID: in.TokenID, Secret: in.Secret, NodeID: in.NodeID, CSRPEM: []byte(in.CSRPEM)})
		switch {
		case errors.Is(err, ErrTokenInvalid):
			writeTestError(w, http.StatusUnauthorized, err)
		case errors.Is(err, ErrTokenExpired), errors.Is(err, ErrTokenRevoked):
			writeTestError(w, http.StatusForbidden, err)
		case errors.Is(err, ErrTokenUsed):
			writeTestError(w, http.StatusConflict, err)
		case errors.Is(err, ErrBadRequest):
			writeTestError(w, http.StatusBadRequest, err)
		case err != nil:
			writeTestError(w, http.StatusInternalServerError, err)
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(apiv1.ClusterJoinResponse{NodeID: out.NodeID, CertificatePEM: string(out.CertificatePEM), CAPEM: string(out.CAPEM)})
		}
	})
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	return c
}

func writeTestError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(apiv1.Error{Error: err.Error()})
}
