package baremetal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kici-dev/kici/internal/scaler"
)

// Recover re-attaches the agents of handles whose process still runs: same
// PID, same start time, same boot. It returns their handles; the others are
// gone, and their work dirs are removed. It never signals a process: a PID
// whose start time does not match belongs to someone else now. A handle
// already tracked is returned as it is.
func (b *Backend) Recover(ctx context.Context, handles []scaler.Handle) ([]scaler.Handle, error) {
	var out []scaler.Handle
	for _, h := range handles {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("recover bare-metal agents: %w", err)
		}
		log := b.log.With("agent_id", h.AgentID)
		if b.lookup(h.AgentID) != nil {
			out = append(out, h)
			continue
		}
		rec, err := decodeRecord(h.Blob)
		if err != nil {
			log.Warn("agent handle unreadable; the agent counts as gone", "error", err)
			continue
		}
		if ours, zombie := sameProcess(rec); !ours || zombie {
			log.Info("agent process gone", "pid", rec.PID)
			b.removeGone(h.AgentID, rec)
			continue
		}
		p := newAgentProc(h.AgentID, rec, h, log, b.cfg.Now, false)
		p.registered = true // no one listens for its failure any more
		b.mu.Lock()
		if b.closed || b.agents[h.AgentID] != nil || b.starting[h.AgentID] {
			b.mu.Unlock()
			continue
		}
		b.agents[h.AgentID] = p
		b.wg.Add(1)
		b.mu.Unlock()
		go b.pollAdopted(p)
		log.Info("agent process re-attached", "pid", rec.PID)
		out = append(out, h)
	}
	return out, nil
}

// removeGone removes the work dir of an agent that is gone, if the record
// names the place this backend would have put it (a record is store data:
// it must not send RemoveAll elsewhere).
func (b *Backend) removeGone(agentID string, rec record) {
	if checkAgentID(agentID) != nil || filepath.Clean(rec.WorkDir) != b.agentDir(agentID) {
		return
	}
	_ = os.RemoveAll(rec.WorkDir)
}
