package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/dispatch"
	"github.com/kici-dev/kici/internal/metrics"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/store"
)

// scalerSink carries what the scaler manager reports into the job: its
// timeline (job_events, shown as the provisioning section of the job's
// logs), the live event stream, the queue row's provisioning error, and
// the metrics.
type scalerSink struct {
	log     *slog.Logger
	db      *store.DB
	pub     hubPublisher
	disp    *dispatch.Dispatcher
	metrics *metrics.Registry
}

func (s scalerSink) ScalerEvent(runID, jobID string, ev scaler.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.db.AddJobEvent(ctx, store.JobEvent{JobID: jobID, RunID: runID, Type: ev.Type, AgentID: ev.AgentID, Detail: ev.Detail, CreatedAt: ev.Time})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("record scaler event failed", "run_id", runID, "job_id", jobID, "agent_id", ev.AgentID, "error", err)
	}
	s.pub.Publish(apiv1.Event{Kind: "scaler", RunID: runID, JobID: jobID, EventType: ev.Type, AgentID: ev.AgentID, Detail: ev.Detail})
}

func (s scalerSink) ProvisioningFailed(jobID, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.db.SetProvisioningError(ctx, jobID, detail); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("record provisioning error failed", "job_id", jobID, "error", err)
	}
}

func (s scalerSink) CapacityFreed() { s.disp.JobsQueued() }

func (s scalerSink) SpawnFailed(backend string, bound bool) {
	s.metrics.ScalerSpawnFailures.WithLabelValues(backend, fmt.Sprint(bound)).Inc()
}

func (s scalerSink) RetireAgent(agentID string) bool { return s.disp.RetireIdle(agentID) }

func (s scalerSink) SpawnRefused(name, cap string) {
	s.metrics.ScalerSpawnRefusals.WithLabelValues(name, cap).Inc()
}

func (s scalerSink) AgentProvisioned(backend string, took time.Duration) {
	s.metrics.ScalerProvisioning.WithLabelValues(backend).Observe(took.Seconds())
}

// instanceID returns this orchestrator's stable instance id, kept in the
// data dir; containers and other compute are labelled with it so that a
// restarted orchestrator reaps only its own leftovers.
func instanceID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "instance-id")
	data, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(data)); id != "" {
			return id, nil
		}
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read instance id %s: %w", path, err)
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := "kici-" + hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write instance id %s: %w", path, err)
	}
	return id, nil
}
