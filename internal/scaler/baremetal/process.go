package baremetal

import (
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// tailLines is how many of an agent's last output lines a failure shows.
const tailLines = 50

// agentProc is one agent process the backend tracks: a child it started
// (child) or a process it re-attached after a restart.
//
//	           Spawn                       process exits
//	  (child) ───────► running ─────────────────────────────► gone
//	           Recover    │                                    ▲
//	(adopted) ───────►    │ Destroy: SIGTERM, KillGrace,       │
//	                      └─► SIGKILL group and session ───────┘
//	                                                           │ teardown: work dir
//	                                                           ▼ removed, untracked
//	                                                        stopped
//
// A child that is gone before MarkRegistered and before Destroy emits
// EventFailed with the tail of its output.
type agentProc struct {
	id      string
	pid     int
	rec     record
	handle  scaler.Handle
	log     *slog.Logger
	onEvent func(scaler.Event) // nil for an adopted process
	now     func() time.Time
	// child is true for a process this backend started and reaps; false for
	// one re-attached by Recover, whose identity is checked before every
	// signal.
	child bool

	// gone is closed once the process has exited (a child: and been reaped).
	gone chan struct{}

	mu         sync.Mutex
	registered bool
	destroying bool
	// reaped is set (under mu) just before a child is reaped: from then on
	// its PID may belong to someone else, so nothing signals it.
	reaped bool

	stopOnce  sync.Once
	hurry     chan struct{} // closed to skip the rest of the kill grace
	hurryOnce sync.Once
	stopped   chan struct{} // closed when Destroy's teardown is over
	stopErr   error         // teardown's result, set before stopped is closed
}

func newAgentProc(id string, rec record, h scaler.Handle, log *slog.Logger, now func() time.Time, child bool) *agentProc {
	return &agentProc{
		id: id, pid: rec.PID, rec: rec, handle: h, log: log, now: now, child: child,
		gone: make(chan struct{}), hurry: make(chan struct{}), stopped: make(chan struct{}),
	}
}

func (p *agentProc) emit(typ, detail string) {
	if p.onEvent != nil {
		p.onEvent(scaler.Event{AgentID: p.id, Type: typ, Detail: detail, Time: p.now()})
	}
}

func (p *agentProc) isGone() bool {
	select {
	case <-p.gone:
		return true
	default:
		return false
	}
}

func (p *agentProc) hurryUp() { p.hurryOnce.Do(func() { close(p.hurry) }) }

// signal sends SIGTERM to the agent's process group, or (kill) SIGKILL to
// its group and session, unless the process can no longer be ours: a child
// that is being reaped, or an adopted process whose start time changed.
func (p *agentProc) signal(kill bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.child && p.reaped {
		return nil
	}
	if !p.child {
		if ours, _ := sameProcess(p.rec); !ours {
			return nil
		}
	}
	if kill {
		return killGroup(p.pid)
	}
	return terminateGroup(p.pid)
}

// stop ends the process: SIGTERM, up to grace (less if hurried), then
// SIGKILL and up to killWait.
func (p *agentProc) stop(grace time.Duration) error {
	if p.isGone() {
		return nil
	}
	if err := p.signal(false); err != nil {
		p.log.Warn("sigterm agent process group", "pid", p.pid, "error", err)
	} else {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.gone:
			return nil
		case <-t.C:
		case <-p.hurry:
		}
	}
	if err := p.signal(true); err != nil {
		return fmt.Errorf("kill agent process %d: %w", p.pid, err)
	}
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-p.gone:
		return nil
	case <-t.C:
		return fmt.Errorf("agent process %d still runs %s after SIGKILL", p.pid, killWait)
	}
}

// watchChild waits for a child to exit, kills what is left of its group and
// session while its PID is still reserved, reaps it, and reports an exit
// before registration. It waits for spawned (closed when Spawn has emitted
// its own events or given up) before it emits, so that EventFailed comes
// last.
func (b *Backend) watchChild(p *agentProc, cmd *exec.Cmd, spawned <-chan struct{}) {
	defer b.wg.Done()
	if waitExited(p.pid) {
		// The leader is an unreaped zombie: its PID, group id and session
		// id cannot be reused, so the sweep hits only its own leftovers.
		p.mu.Lock()
		_ = killGroup(p.pid)
		p.reaped = true
		p.mu.Unlock()
		_ = cmd.Wait()
	} else {
		_ = cmd.Wait()
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
	}
	how := describeExit(cmd.ProcessState)
	p.log.Info("agent process exited", "pid", p.pid, "exit", how)
	p.mu.Lock()
	report := !p.registered && !p.destroying
	p.mu.Unlock()
	var out string
	if report {
		// The process has been reaped: everything it wrote is in the file.
		out = lastLines(p.rec.LogPath, tailLines)
	}
	close(p.gone)
	if !report {
		return
	}
	<-spawned
	p.mu.Lock()
	report = !p.registered && !p.destroying
	p.mu.Unlock()
	if !report {
		return
	}
	detail := fmt.Sprintf("agent process %s before it registered", how)
	if out != "" {
		detail += "\n--- last output ---\n" + out
	}
	p.emit(scaler.EventFailed, detail)
}

// pollAdopted watches an adopted process until it is gone or the backend
// closes.
func (b *Backend) pollAdopted(p *agentProc) {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.PollInterval)
	defer t.Stop()
	for {
		if ours, zombie := sameProcess(p.rec); !ours || zombie {
			p.log.Info("re-attached agent process is gone", "pid", p.pid)
			close(p.gone)
			return
		}
		select {
		case <-t.C:
		case <-b.quit:
			return
		}
	}
}
