package baremetal_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/baremetal"
)

// childEnv switches the test binary into a scripted child (see runChild).
const childEnv = "BAREMETAL_TEST_CHILD"

var (
	// agentBinary is kici-agent, built by TestMain.
	agentBinary string
	// testBinary is this test binary, which runChild turns into a scripted
	// agent.
	testBinary string
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kici-baremetal-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentBinary = filepath.Join(dir, "kici-agent")
	build := exec.Command("go", "build", "-o", agentBinary, "github.com/kici-dev/kici/cmd/kici-agent")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build kici-agent: %v\n%s", err, out)
		return 1
	}
	if testBinary, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// runChild is the test binary run as an agent by a test, steered by the
// label set's env.
func runChild(mode string) int {
	switch mode {
	case "sleep":
		time.Sleep(time.Hour)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		time.Sleep(time.Hour)
	case "grandchild":
		// Like a job step: a process in a group of its own.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"=sleep")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("grandchild %d\n", cmd.Process.Pid)
		time.Sleep(time.Hour)
	case "lines":
		for i := 1; i < 60; i++ {
			fmt.Printf("line %d\n", i)
		}
		fmt.Fprint(os.Stderr, "line 60") // the last line, unterminated, on stderr
		return 3
	case "env":
		env := os.Environ()
		slices.Sort(env)
		fmt.Println(strings.Join(env, "\n"))
	default:
		fmt.Println("unknown mode", mode)
		return 1
	}
	return 0
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newBackend builds a backend in a fresh work dir with a short kill grace,
// closed when the test ends.
func newBackend(t *testing.T, mutate func(*baremetal.Config)) (*baremetal.Backend, baremetal.Config) {
	t.Helper()
	cfg := baremetal.Config{Name: "test", WorkDir: t.TempDir(), KillGrace: 2 * time.Second, PollInterval: 20 * time.Millisecond}
	if mutate != nil {
		mutate(&cfg)
	}
	b := baremetal.New(testLogger(t), cfg)
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("Close: got %v, want nil", err)
		}
	})
	return b, cfg
}

// events records a spawn's events.
type events struct {
	mu   sync.Mutex
	list []scaler.Event
}

func (e *events) add(ev scaler.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *events) all() []scaler.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

func (e *events) types() []string {
	var out []string
	for _, ev := range e.all() {
		out = append(out, ev.Type)
	}
	return out
}

// failed returns the EventFailed, if one came.
func (e *events) failed() (scaler.Event, bool) {
	for _, ev := range e.all() {
		if ev.Type == scaler.EventFailed {
			return ev, true
		}
	}
	return scaler.Event{}, false
}

// request is a spawn of binary steered by env, with the KICI_* identity the
// manager gives (and an orchestrator URL nothing listens on).
func request(t *testing.T, binary string, env map[string]string) (scaler.SpawnRequest, *events) {
	ev := &events{}
	id := "scaler-bare-metal-" + strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
	return scaler.SpawnRequest{
		AgentID:  id,
		Scaler:   "test",
		LabelSet: scaler.LabelSet{Labels: []string{"test"}, BinaryPath: binary, Env: env},
		Env: map[string]string{
			"KICI_ORCHESTRATOR_URL": "ws://127.0.0.1:1/ws",
			"KICI_AGENT_ID":         id,
			"KICI_AGENT_TOKEN":      scaler.TokenPrefix + "secret",
			"KICI_LABELS":           "test",
			"KICI_AGENT_ONE_SHOT":   "1",
			"KICI_AGENT_SCALER":     "1",
		},
		OnEvent: ev.add,
	}, ev
}

// eventually polls cond every 10 ms until it holds, for up to 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
