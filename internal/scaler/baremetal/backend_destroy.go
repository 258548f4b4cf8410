package baremetal

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Destroy stops an agent: SIGTERM to its process group, up to KillGrace,
// then SIGKILL to its group and session. It then removes the agent's work
// dir and stops tracking it; the log file stays. An unknown or destroyed id
// gives nil. Concurrent calls for one agent share one teardown and wait for
// it. When ctx ends first, the rest of the grace period is skipped (the
// teardown goes on in the background) and Destroy returns ctx's error.
func (b *Backend) Destroy(ctx context.Context, agentID string) error {
	p := b.lookup(agentID)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.destroying = true
	p.mu.Unlock()
	p.stopOnce.Do(func() { go b.teardown(p) })
	select {
	case <-p.stopped:
		return p.stopErr
	case <-ctx.Done():
		p.hurryUp()
		return fmt.Errorf("destroy agent %q: %w", agentID, ctx.Err())
	}
}

// teardown is Destroy's work, run once per agent.
func (b *Backend) teardown(p *agentProc) {
	start := time.Now()
	err := p.stop(b.cfg.KillGrace)
	b.mu.Lock()
	if b.agents[p.id] == p {
		delete(b.agents, p.id)
	}
	b.mu.Unlock()
	if err == nil {
		if rmErr := os.RemoveAll(p.rec.WorkDir); rmErr != nil {
			err = fmt.Errorf("remove work dir of agent %q: %w", p.id, rmErr)
		}
		b.pruneLogs()
		p.log.Info("agent destroyed", "pid", p.pid, "took", time.Since(start).Round(time.Millisecond))
	}
	p.stopErr = err
	close(p.stopped)
}

// pruneLogs removes the oldest log files of agents it no longer tracks,
// keeping KeepLogs of them.
func (b *Backend) pruneLogs() {
	dir := b.logsDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type logFile struct {
		name string
		mod  time.Time
	}
	var logs []logFile
	b.mu.Lock()
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !e.Type().IsRegular() || b.agents[id] != nil || b.starting[id] {
			continue
		}
		if info, err := e.Info(); err == nil {
			logs = append(logs, logFile{e.Name(), info.ModTime()})
		}
	}
	b.mu.Unlock()
	if len(logs) <= b.cfg.KeepLogs {
		return
	}
	slices.SortFunc(logs, func(a, b logFile) int { return cmp.Compare(b.mod.UnixNano(), a.mod.UnixNano()) })
	for _, l := range logs[b.cfg.KeepLogs:] {
		_ = os.Remove(filepath.Join(dir, l.name))
	}
}
