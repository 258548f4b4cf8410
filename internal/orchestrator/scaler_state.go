package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/store"
)

// spawnStore keeps the scaler manager's spawn records in the database.
type spawnStore struct{ db *store.DB }

func (s spawnStore) SaveSpawn(ctx context.Context, r scaler.SpawnRecord) error {
	var h []byte // none yet: stored as "", which never replaces a stored handle
	if r.Handle.AgentID != "" || len(r.Handle.Blob) > 0 {
		var err error
		if h, err = json.Marshal(r.Handle); err != nil {
			return err
		}
	}
	return s.db.SaveScalerSpawn(ctx, store.ScalerSpawn{AgentID: r.AgentID, Scaler: r.Scaler, JobID: r.JobID, RunID: r.RunID,
		LabelKey: r.LabelKey, Handle: string(h), Registered: r.Registered})
}

func (s spawnStore) DeleteSpawn(ctx context.Context, agentID string) error {
	return s.db.DeleteScalerSpawn(ctx, agentID)
}

func (s spawnStore) ListSpawns(ctx context.Context) ([]scaler.SpawnRecord, error) {
	rows, err := s.db.ListScalerSpawns(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]scaler.SpawnRecord, 0, len(rows))
	for _, r := range rows {
		rec := scaler.SpawnRecord{AgentID: r.AgentID, Scaler: r.Scaler, JobID: r.JobID, RunID: r.RunID, LabelKey: r.LabelKey, Registered: r.Registered}
		if r.Handle != "" {
			if err := json.Unmarshal([]byte(r.Handle), &rec.Handle); err != nil {
				return nil, fmt.Errorf("decode handle of agent %q: %w", r.AgentID, err)
			}
		}
		out = append(out, rec)
	}
	return out, nil
}

// loadKey reads a 32-byte key from path, creating it (mode 0600) on first
// use.
func loadKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil && len(key) == 32 {
		return key, nil
	}
	if err == nil {
		return nil, fmt.Errorf("key file %s: %d bytes, want 32", path, len(key))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create key %s: %w", path, err)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
}
