package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDrillLogVolumeFull: the orchestrator's log directory is a 256 KiB
// tmpfs and a job prints far more. The job must end with a clear error
// naming the lack of space, and every stored log file must still be whole
// JSON lines. Needs root (to mount); skipped otherwise.
func TestDrillLogVolumeFull(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	logDir := filepath.Join(dataDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, logDir, "256k")

	o := startOrchestrator(t, "", "KICI_DATA_DIR="+dataDir)
	o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  loud:
    steps:
      - run: for i in $(seq 1 20000); do echo "line $i of a job that prints far more than the log volume holds"; done
`})
	startAgent(t, o, "", "loud", nil)
	id := o.push(t)
	r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
	j := job(t, r, "loud")
	if r.Status != "failure" || j.Status != "failure" || !strings.Contains(strings.ToLower(j.Error), "no space") {
		t.Errorf("run %s, job %s (%q): want failure with an error naming the lack of space", r.Status, j.Status, j.Error)
	}
	// Read the files at rest: an append in progress (a chunk the agent sent
	// before it heard the job ended) may be half written until its write
	// fails and is undone; readers of the API only ever return whole lines.
	o.stop()
	err := filepath.WalkDir(logDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Errorf("%s: ends inside a line", path)
		}
		for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			if line == "" && len(data) == 0 {
				continue
			}
			if !json.Valid([]byte(line)) {
				t.Errorf("%s:%d: not JSON: %.80q", path, i+1, line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
