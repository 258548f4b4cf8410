package baremetal_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDestroyKillsSession: a process the agent started in a group of its
// own (as it does for job steps) dies with the agent.
func TestDestroyKillsSession(t *testing.T) {
	t.Parallel()
	b, cfg := newBackend(t, nil)
	req, _ := request(t, testBinary, map[string]string{childEnv: "grandchild"})
	if _, err := b.Spawn(t.Context(), req); err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	m := waitOutput(t, cfg, req.AgentID, regexp.MustCompile(`grandchild (\d+)`))
	grandchild, _ := strconv.Atoi(m[1])
	if err := b.Destroy(t.Context(), req.AgentID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	// Reparented to init when the agent died, it may stay a zombie for a
	// moment: dead, but not reaped yet.
	eventually(t, "the grandchild to die", func() bool { return !running(grandchild) })
}

// running reports whether pid runs; a zombie does not.
func running(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(data), ") Z ")
}
