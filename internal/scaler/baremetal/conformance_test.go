package baremetal_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/baremetal"
	"github.com/kici-dev/kici/internal/scaler/scalertest"
)

// TestConformance runs the real kici-agent through the shared harness.
func TestConformance(t *testing.T) {
	t.Parallel()
	scalertest.Run(t, scalertest.Harness{
		New: func(t *testing.T, dir string) scaler.Backend {
			return baremetal.New(testLogger(t), baremetal.Config{
				Name: "conformance", WorkDir: dir, KillGrace: 5 * time.Second, PollInterval: 20 * time.Millisecond,
			})
		},
		LabelSet: func(*testing.T) scaler.LabelSet {
			return scaler.LabelSet{Labels: []string{"bare", "conformance"}, BinaryPath: agentBinary}
		},
		LocalProcess: true,
		Leftovers: func(t *testing.T, dir, agentID string) []string {
			if _, err := os.Stat(filepath.Join(dir, "agents", agentID)); err == nil {
				return []string{"work dir agents/" + agentID}
			}
			return nil
		},
	})
}
