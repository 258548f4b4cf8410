package scaler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/kici-dev/kici/internal/durable"
)

// maxFileStateBytes bounds the spawn record file FileState reads: a few
// hundred records of a few hundred bytes each fit many times over.
const maxFileStateBytes = 16 << 20

// FileState keeps spawn records in one JSON file, for a manager without a
// database (a cluster worker). Every change rewrites the file durably
// (written aside, fsync'd, renamed, directory synced), so a crash leaves
// the old or the new records, never a torn file.
type FileState struct {
	path string
	mu   sync.Mutex
}

// NewFileState returns a FileState over path; the file is created on the
// first save.
func NewFileState(path string) *FileState { return &FileState{path: path} }

func (f *FileState) read() (map[string]SpawnRecord, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]SpawnRecord{}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileStateBytes {
		return nil, fmt.Errorf("spawn records %s: %d bytes, more than the %d allowed", f.path, len(data), maxFileStateBytes)
	}
	out := map[string]SpawnRecord{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("spawn records %s: %w", f.path, err)
	}
	return out, nil
}

func (f *FileState) change(fn func(map[string]SpawnRecord)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	recs, err := f.read()
	if err != nil {
		return err
	}
	fn(recs)
	data, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	tmp := f.path + ".tmp"
	if err := durable.WriteFile(tmp, data, os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
		return fmt.Errorf("write spawn records: %w", err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		return fmt.Errorf("write spawn records: %w", err)
	}
	return durable.Sync(filepath.Dir(f.path))
}

// SaveSpawn stores r, replacing the record of the same agent. A record
// without a handle keeps the handle already stored.
func (f *FileState) SaveSpawn(_ context.Context, r SpawnRecord) error {
	return f.change(func(m map[string]SpawnRecord) {
		if old, ok := m[r.AgentID]; ok && r.Handle.AgentID == "" && len(r.Handle.Blob) == 0 {
			r.Handle = old.Handle
		}
		m[r.AgentID] = r
	})
}

// DeleteSpawn drops an agent's record.
func (f *FileState) DeleteSpawn(_ context.Context, agentID string) error {
	return f.change(func(m map[string]SpawnRecord) { delete(m, agentID) })
}

// ListSpawns returns every record, by agent id.
func (f *FileState) ListSpawns(context.Context) ([]SpawnRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	recs, err := f.read()
	if err != nil {
		return nil, err
	}
	out := make([]SpawnRecord, 0, len(recs))
	for _, r := range recs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}
