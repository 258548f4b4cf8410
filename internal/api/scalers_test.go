package api_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/orchestrator"
	"github.com/kici-dev/kici/internal/scaler"
)

// orphanList and stopAnswer are the answers of GET
// /api/v1/scalers/orphans and POST /api/v1/scalers/orphans/stop.
type orphanList struct {
	Compute []scaler.Orphan `json:"compute"`
	Error   string          `json:"error"`
}

type stopAnswer struct {
	Outcomes []scaler.StopOutcome `json:"outcomes"`
}

// sleeperScaler writes a scalers.yaml whose bare-metal scaler spawns, for
// a job that runs on [orphan-drill], a process that only sleeps: it never
// registers, so it stays live and spawning.
func sleeperScaler(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sleeper")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "scalers.yaml")
	cfg := fmt.Sprintf(`version: 1
scalers:
  - name: sleepers
    type: bare-metal
    maxAgents: 1
    labelSets:
      - labels: [orphan-drill]
        binaryPath: %s
`, bin)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestScalerOrphansAPI: the listing shows tracked compute with what
// tracks it, to a role that may read scalers; stopping needs
// scaler.manage, answers an outcome per id and never stops tracked
// compute; bad bodies and ids are refused with 400 naming what is wrong.
func TestScalerOrphansAPI(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, func(c *orchestrator.Config) {
		c.ScalerConfigPath = sleeperScaler(t)
	}, func(t *testing.T, h *harness) {
		dir, _ := gitRepo(t, map[string]string{".kici/workflows/ci.yml": `name: ci
on: {push: {branches: [main]}}
jobs:
  wait:
    runs-on: [orphan-drill]
    steps: [{run: "true"}]
`})
		h.addSource(t, "drill", dir, "")
		h.trigger(t, "drill")
		auditor := h.newAdminToken(t, "orphan auditor", auth.Auditor)
		if !auth.Auditor.Can(auth.ScalerRead) || auth.Auditor.Can(auth.ScalerManage) {
			t.Fatalf("role %s: want scaler.read and not scaler.manage", auth.Auditor)
		}

		// The auditor sees the spawned process, tracked by its spawn.
		var list orphanList
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp := h.call(t, auditor.Token, http.MethodGet, "/api/v1/scalers/orphans", "")
			if resp.status != http.StatusOK {
				t.Fatalf("GET orphans as %s: got status %d (%s), want 200", auth.Auditor, resp.status, resp.body)
			}
			resp.decode(t, &list)
			if len(list.Compute) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if list.Error != "" || len(list.Compute) != 1 {
			t.Fatalf("GET orphans: got %+v, want one compute and no error", list)
		}
		got := list.Compute[0]
		if got.Scaler != "sleepers" || got.Backend != "bare-metal" || !strings.HasPrefix(got.ID, "scaler-bare-metal-") ||
			got.Status != scaler.ComputeTracked || !slices.Equal(got.TrackedBy, []string{scaler.TrackedBySpawning}) {
			t.Errorf("GET orphans: got %+v, want the sleepers' agent, tracked by spawning", got)
		}
		var pid int
		if _, err := fmt.Sscan(got.Ref, &pid); err != nil {
			t.Fatalf("ref %q: want the process id", got.Ref)
		}

		// The auditor may not stop anything.
		body := fmt.Sprintf(`{"ids": [%q]}`, got.ID)
		resp := h.call(t, auditor.Token, http.MethodPost, "/api/v1/scalers/orphans/stop", body)
		if resp.status != http.StatusForbidden {
			t.Fatalf("POST stop as %s: got status %d (%s), want 403", auth.Auditor, resp.status, resp.body)
		}
		wantMsg := fmt.Sprintf("role %q does not have permission %q", auth.Auditor, auth.ScalerManage)
		if msg := resp.apiError(t).Error; msg != wantMsg {
			t.Errorf("POST stop as %s: got error %q, want %q", auth.Auditor, msg, wantMsg)
		}

		// An admin gets an outcome per id: the tracked one is refused.
		var ans stopAnswer
		h.mustAdmin(t, http.MethodPost, "/api/v1/scalers/orphans/stop",
			fmt.Sprintf(`{"ids": [%q, "scaler-bare-metal-none"]}`, got.ID), http.StatusOK, &ans)
		if len(ans.Outcomes) != 2 ||
			ans.Outcomes[0].ID != got.ID || ans.Outcomes[0].Outcome != scaler.OutcomeTracked ||
			ans.Outcomes[1].ID != "scaler-bare-metal-none" || ans.Outcomes[1].Outcome != scaler.OutcomeNotFound {
			t.Errorf("POST stop: got %+v, want %s tracked and scaler-bare-metal-none not-found", ans.Outcomes, got.ID)
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("process %d of the tracked agent: %v, want it still running", pid, err)
		}

		for _, tt := range []struct {
			name, body, wantMsg string
		}{
			{name: "no ids", body: `{}`, wantMsg: "bad ids: want 1 to 100 ids, got 0"},
			{name: "empty list", body: `{"ids": []}`, wantMsg: "bad ids: want 1 to 100 ids, got 0"},
			{name: "the old field", body: `{"agent_ids": ["x"]}`, wantMsg: `unknown field "agent_ids"`},
			{name: "not JSON", body: `ids`, wantMsg: "invalid JSON body"},
			{name: "an empty id", body: fmt.Sprintf(`{"ids": [%q, ""]}`, got.ID), wantMsg: "bad ids: ids[1] is empty"},
			{name: "a path", body: `{"ids": ["../etc"]}`, wantMsg: `bad ids: ids[0] "../etc" holds a "/"`},
			{name: "dot dot", body: `{"ids": [".."]}`, wantMsg: `bad ids: ids[0] ".." is not an id`},
			{name: "too many", body: `{"ids": [` + strings.Repeat(`"a",`, 100) + `"a"]}`, wantMsg: "bad ids: want 1 to 100 ids, got 101"},
		} {
			resp := h.admin(t, http.MethodPost, "/api/v1/scalers/orphans/stop", tt.body)
			var e apiv1.Error
			resp.decode(t, &e)
			if resp.status != http.StatusBadRequest || !strings.Contains(e.Error, tt.wantMsg) {
				t.Errorf("%s: got %d %q, want 400 saying %q", tt.name, resp.status, e.Error, tt.wantMsg)
			}
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("process %d after the refused requests: %v, want it still running", pid, err)
		}
	})
}
