package api_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/orchestrator"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/testsvc"
)

// adminToken is the bootstrap admin token of every test orchestrator.
const adminToken = "test-admin-token"

// engine is one database engine the orchestrator runs on.
type engine struct {
	name string
	// databaseURL returns the DatabaseURL of a fresh, empty database; ""
	// means SQLite in the data dir.
	databaseURL func(t *testing.T) string
}

var engines = []engine{
	{name: "sqlite", databaseURL: func(t *testing.T) string { return "" }},
	{name: "postgres", databaseURL: func(t *testing.T) string { return testsvc.PostgresURL(t) }},
}

// forEachEngine runs fn, in parallel, once against an orchestrator on
// SQLite and once against one on a fresh PostgreSQL schema (skipped without
// KICI_TEST_DATABASE_URL, or failed if KICI_TEST_REQUIRE_SERVICES=1). The
// subtests of fn share that orchestrator, so each uses sources of its own.
func forEachEngine(t *testing.T, fn func(t *testing.T, h *harness)) {
	t.Helper()
	forEachEngineWith(t, nil, fn)
}

// forEachEngineWith is forEachEngine with the orchestrators' configuration
// changed by edit (when not nil).
func forEachEngineWith(t *testing.T, edit func(*orchestrator.Config), fn func(t *testing.T, h *harness)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			fn(t, startServerWith(t, e.databaseURL(t), edit))
		})
	}
}

// harness is a running orchestrator and a client for its HTTP API.
type harness struct {
	base    string // http://127.0.0.1:PORT
	dataDir string
	dbURL   string
	client  *http.Client
}

// testSecretKey is the KICI_SECRET_KEY of every test orchestrator.
const testSecretKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// startServer runs a real orchestrator on a loopback port until the test
// ends. No agent connects, so runs stay queued. Failed authentications
// are not limited (the tests make many on purpose).
func startServer(t *testing.T, databaseURL string) *harness {
	t.Helper()
	return startServerWith(t, databaseURL, nil)
}

// startServerWith is startServer with the configuration changed by edit
// (when not nil) before the orchestrator starts.
func startServerWith(t *testing.T, databaseURL string, edit func(*orchestrator.Config)) *harness {
	t.Helper()
	dataDir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := orchestrator.Config{
		HTTPAddr:            "127.0.0.1:0",
		PublicURL:           "http://127.0.0.1:4000",
		DataDir:             dataDir,
		DatabaseURL:         databaseURL,
		BootstrapAdminToken: adminToken,
		SecretKey:           testSecretKey,
		AuthFailureLimit:    -1,
		AgentAuth:           "none",
		QueueTimeout:        0, // never: runs stay queued for the whole test
		QueueSweepInterval:  time.Hour,
		DispatchAckTimeout:  time.Minute,
		AgentRecoveryWindow: time.Minute,
		DefaultJobTimeout:   time.Hour,
		CancelGrace:         time.Second,
	}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := orchestrator.New(t.Context(), logger, cfg)
	if err != nil {
		t.Fatalf("start orchestrator: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(t.Context()) }()
	transport := &http.Transport{}
	t.Cleanup(func() {
		// t.Context() is cancelled before cleanups run, which stops Run.
		transport.CloseIdleConnections()
		if err := <-done; err != nil {
			t.Errorf("orchestrator run: %v", err)
		}
	})
	return &harness{
		base:    "http://" + srv.Addr().String(),
		dataDir: dataDir,
		dbURL:   databaseURL,
		client:  &http.Client{Transport: transport, Timeout: 30 * time.Second},
	}
}

// openStore opens a second handle on the orchestrator's database, for the
// few set-ups the API cannot make (two webhook secrets).
func (h *harness) openStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), store.Config{DataDir: h.dataDir, DatabaseURL: h.dbURL, MaxConns: 2})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return db
}

// response is one HTTP answer, its body read.
type response struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the body into v, failing the test if it is not JSON.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode response (status %d) %q: %v", r.status, r.body, err)
	}
}

// apiError decodes an error answer.
func (r response) apiError(t *testing.T) apiv1.Error {
	t.Helper()
	var e apiv1.Error
	r.decode(t, &e)
	return e
}

// send sends one request with the given headers and body (nil for none).
// It does not touch t, so it may run in any goroutine.
func (h *harness) send(ctx context.Context, method, path string, header http.Header, body []byte) (response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, r)
	if err != nil {
		return response{}, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("read body: %w", err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// do is send that fails the test on a transport error.
func (h *harness) do(t *testing.T, method, path string, header http.Header, body []byte) response {
	t.Helper()
	resp, err := h.send(t.Context(), method, path, header, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// admin sends an admin request; in, when not nil, is sent as JSON (a
// []byte or string as it is).
func (h *harness) admin(t *testing.T, method, path string, in any) response {
	t.Helper()
	header := http.Header{"Authorization": {"Bearer " + adminToken}}
	var body []byte
	switch v := in.(type) {
	case nil:
	case []byte:
		body = v
	case string:
		body = []byte(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encode request: %v", err)
		}
		body = data
	}
	if body != nil {
		header.Set("Content-Type", "application/json")
	}
	return h.do(t, method, path, header, body)
}

// mustAdmin is admin that fails the test unless the status is want, and
// decodes the answer into out when out is not nil.
func (h *harness) mustAdmin(t *testing.T, method, path string, in any, want int, out any) {
	t.Helper()
	resp := h.admin(t, method, path, in)
	if resp.status != want {
		t.Fatalf("%s %s: got status %d (%s), want %d", method, path, resp.status, resp.body, want)
	}
	if out != nil {
		resp.decode(t, out)
	}
}

// addSource registers a local source over dir, with the webhook secret if
// not empty.
func (h *harness) addSource(t *testing.T, name, dir, secret string) {
	t.Helper()
	h.mustAdmin(t, http.MethodPost, "/api/v1/sources", apiv1.Source{Name: name, Kind: "local", Path: dir, WebhookSecret: secret}, http.StatusCreated, nil)
}

// runs lists the runs of a source, newest first.
func (h *harness) runs(t *testing.T, source string) []apiv1.Run {
	t.Helper()
	var out apiv1.RunList
	h.mustAdmin(t, http.MethodGet, "/api/v1/runs?source="+source, nil, http.StatusOK, &out)
	return out.Runs
}

// getRun reads one run with its jobs.
func (h *harness) getRun(t *testing.T, id string) apiv1.Run {
	t.Helper()
	var out apiv1.Run
	h.mustAdmin(t, http.MethodGet, "/api/v1/runs/"+id, nil, http.StatusOK, &out)
	return out
}

// trigger triggers a push of main on source and returns the runs started.
func (h *harness) trigger(t *testing.T, source string) []apiv1.RunRef {
	t.Helper()
	var out apiv1.TriggerResponse
	h.mustAdmin(t, http.MethodPost, "/api/v1/sources/"+source+"/trigger", apiv1.TriggerRequest{Event: "push", Ref: "main"}, http.StatusOK, &out)
	return out.Runs
}

// jobStatuses maps a run's job names to their statuses.
func jobStatuses(run apiv1.Run) map[string]string {
	out := map[string]string{}
	for _, j := range run.Jobs {
		out[j.Name] = j.Status
	}
	return out
}

// sign returns the X-Hub-Signature-256 value of body under secret.
func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// ciWorkflow is the workflow of the test repositories: build runs first on
// linux, test needs it, lint runs beside build on [linux, docker].
const ciWorkflow = `name: ci
on:
  push: {branches: [main]}
  tag: {tags: ["v*"]}
  manual: {}
jobs:
  build:
    runs-on: [linux]
    steps:
      - name: compile
        run: echo build
  lint:
    runs-on: [linux, docker]
    steps:
      - run: echo lint
  test:
    needs: [build]
    runs-on: [linux]
    steps:
      - name: unit
        run: echo test
      - name: integration
        run: echo integration
`

// gitRepo creates a git repository in a new temporary directory with files
// committed on branch main, and returns the directory and the commit.
func gitRepo(t *testing.T, files map[string]string) (dir, sha string) {
	t.Helper()
	dir = t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=kici test", "-c", "user.email=test@kici.invalid", "-c", "commit.gpgsign=false",
		"commit", "-q", "-m", "initial")
	return dir, strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
}

// ciRepo is gitRepo with ciWorkflow.
func ciRepo(t *testing.T) (dir, sha string) {
	t.Helper()
	return gitRepo(t, map[string]string{".kici/workflows/ci.yml": ciWorkflow, "README.md": "hello\n"})
}

// git runs git in dir, isolated from the user's and the system's config,
// and returns its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
