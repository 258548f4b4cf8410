package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Targets of the issue, in MB (10^6 bytes; /proc reports kB = 1024 bytes,
// converted below).
const (
	agentRSSTarget        = 15.0
	orchestratorRSSTarget = 40.0
)

// readRSS returns VmRSS of pid in MB (10^6 bytes).
func readRSS(pid int) (float64, error) {
	return readStatus(pid, "VmRSS")
}

// readStatus returns a kB field of /proc/<pid>/status in MB.
func readStatus(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
			return 0, fmt.Errorf("parse %s %q: %w", field, v, err)
		}
		return float64(kb) * 1024 / 1e6, nil
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// benchRSS reads the resident set of an orchestrator (SQLite) idle after
// startup and of an agent connected to it with no job, each after
// cfg.settle of idling.
func (h *harness) benchRSS(ctx context.Context) {
	sc := &scope{}
	defer sc.close()
	if err := h.rss(ctx, sc); err != nil {
		h.rep.fail("rss", engineSQLite, err)
	}
}

func (h *harness) rss(ctx context.Context, sc *scope) error {
	o, err := h.startOrchestrator(ctx, sc, "")
	if err != nil {
		return err
	}
	if err := sleep(ctx, h.cfg.settle); err != nil {
		return err
	}
	orss, err := readRSS(o.proc.pid())
	if err != nil {
		return err
	}
	agent, err := h.startAgent(ctx, sc, o, "bench-idle-agent", true)
	if err != nil {
		return err
	}
	if err := sleep(ctx, h.cfg.settle); err != nil {
		return err
	}
	arss, err := readRSS(agent.pid())
	if err != nil {
		return err
	}
	hwm, _ := readStatus(agent.pid(), "VmHWM")
	ohwm, _ := readStatus(o.proc.pid(), "VmHWM")
	note := fmt.Sprintf("read %s after the process became idle; peaks (VmHWM) orchestrator %.1f MB, agent %.1f MB", h.cfg.settle, ohwm, hwm)
	h.rep.add(result{
		Benchmark: "rss", Name: "orchestrator idle RSS", Engine: engineSQLite, Unit: "MB",
		Value: ptr(orss), Target: fmt.Sprintf("≤ %.0f MB", orchestratorRSSTarget), Met: ptr(orss <= orchestratorRSSTarget),
		Note: note,
	})
	h.rep.add(result{
		Benchmark: "rss", Name: "agent idle RSS (connected)", Engine: engineSQLite, Unit: "MB",
		Value: ptr(arss), Target: fmt.Sprintf("≤ %.0f MB", agentRSSTarget), Met: ptr(arss <= agentRSSTarget),
	})
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		return nil
	}
}
