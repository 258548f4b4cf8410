package agent_test

import (
	"strconv"
	"syscall"
	"testing"

	"github.com/kici-dev/kici/internal/agent"
)

// TestTokenFromDescriptor: the pipe HideToken hands the token over is read
// and closed.
func TestTokenFromDescriptor(t *testing.T) {
	t.Parallel()
	// Raw descriptors, as HideToken leaves them: an *os.File would close
	// the read end again when collected, by then maybe another test's.
	// Close-on-exec, or a parallel test's child would hold the write end
	// and the read would wait for it.
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Write(p[1], []byte("kat_piped")); err != nil {
		t.Fatal(err)
	}
	syscall.Close(p[1])
	fd := strconv.Itoa(p[0])
	env := map[string]string{"KICI_ORCHESTRATOR_URL": "ws://127.0.0.1:4000/ws", "KICI_AGENT_TOKEN_FD": fd}
	got, warnings, err := agent.FromEnv(func(k string) string { return env[k] }, []string{"KICI_AGENT_TOKEN_FD=" + fd})
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	if got.Token != "kat_piped" || len(warnings) != 0 {
		t.Errorf("got token %q, warnings %q; want kat_piped and none", got.Token, warnings)
	}
}
