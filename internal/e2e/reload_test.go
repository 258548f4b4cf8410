package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type scalerStatus struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	MaxAgents int    `json:"max_agents"`
	Active    int    `json:"active"`
	Retiring  bool   `json:"retiring"`
}

func (o *orchestrator) scalers(t *testing.T) map[string]scalerStatus {
	t.Helper()
	var out struct {
		Scalers []scalerStatus `json:"scalers"`
	}
	o.api(t, "GET", "/api/v1/scalers", nil, &out, http.StatusOK)
	m := map[string]scalerStatus{}
	for _, s := range out.Scalers {
		m[s.Name] = s
	}
	return m
}

// TestScalerReloadIsAtomicAndDrainsRemovedScalers: a reload with an
// invalid file, or one that changes a scaler's type, changes nothing; a
// valid one applies; one that removes a scaler lets its running agent
// finish its job but gives it no new work, and then forgets it.
func TestScalerReloadIsAtomicAndDrainsRemovedScalers(t *testing.T) {
	t.Parallel()
	marks := t.TempDir()
	metal := func(maxAgents int) string {
		return fmt.Sprintf(`  - name: metal
    type: bare-metal
    maxAgents: %d
    labelSets:
      - labels: [linux, metal]
        binaryPath: %s
`, maxAgents, agentBin())
	}
	path := writeScalers(t, "version: 1\nscalers:\n"+metal(2))
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := startOrchestrator(t, "", "KICI_SCALER_CONFIG_PATH="+path)
	reload := func(want int) string {
		t.Helper()
		var out map[string]any
		o.api(t, "POST", "/api/v1/scalers/reload", nil, &out, want)
		return fmt.Sprint(out)
	}
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  held:
    runs-on: [metal]
    steps: [{run: "touch %[1]s/started; while [ ! -e %[1]s/go ]; do sleep 0.02; done"}]
`, marks)})

	write("version: 1\nscalers:\n" + strings.Replace(metal(5), "labelSets:", "labelSetz:", 1))
	if got := reload(http.StatusUnprocessableEntity); !strings.Contains(got, "labelSetz") {
		t.Errorf("invalid reload answer %s, want it to name the bad key", got)
	}
	write("version: 1\nscalers:\n" + strings.Replace(metal(5), "type: bare-metal", "type: container", 1) + "    extraHosts: []\n")
	reload(http.StatusUnprocessableEntity)
	if st := o.scalers(t)["metal"]; st.MaxAgents != 2 || st.Type != "bare-metal" {
		t.Fatalf("after rejected reloads: got %+v, want the running config (bare-metal, maxAgents 2)", st)
	}
	write("version: 1\nscalers:\n" + metal(3))
	reload(http.StatusOK)
	if st := o.scalers(t)["metal"]; st.MaxAgents != 3 {
		t.Fatalf("after a valid reload: maxAgents %d, want 3", st.MaxAgents)
	}

	// Drain: metal runs a job, then is removed.
	id := o.push(t)
	waitFor(t, 30*time.Second, "the held job to start", func() bool { return fileExists(filepath.Join(marks, "started")) })
	write("version: 1\nscalers: []\n")
	reload(http.StatusOK)
	if st := o.scalers(t)["metal"]; !st.Retiring || st.Active != 1 {
		t.Errorf("removed scaler with a running agent: got %+v, want retiring with 1 active", st)
	}
	second := o.push(t)
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	r := o.waitRun(t, id, 30*time.Second, "the held run to end", ended)
	if r.Status != "success" {
		t.Errorf("the draining scaler's job: got %s (%s), want success", r.Status, r.Error)
	}
	waitFor(t, 15*time.Second, "the retired scaler to be forgotten", func() bool { _, ok := o.scalers(t)["metal"]; return !ok })
	if r := o.run(t, second); job(t, r, "held").Status != "queued" {
		t.Errorf("a job pushed after the removal: got %s, want queued (no scaler serves it)", job(t, r, "held").Status)
	}
}
