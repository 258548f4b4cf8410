package fake

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
)

// Host is where fake agents run; it stands for the machine, whose agents
// outlive the orchestrator (the Backend) that spawned them.
type Host struct {
	mu     sync.Mutex
	agents map[string]*run
}

// NewHost returns an empty Host.
func NewHost() *Host { return &Host{agents: map[string]*run{}} }

// run is one agent running on a Host.
type run struct {
	id      string
	scaler  string // the scaler it was spawned (or left) for
	workDir string // "" for a Leftover
	started time.Time
	// unverified: its backend cannot confirm it is its own.
	unverified bool
	cancel     context.CancelFunc
	done       chan struct{}
	err        error // main's result, once done is closed
}

// Leftover is compute on a Host that no Backend tracks, as a crashed
// orchestrator leaves it behind: an orphan.
type Leftover struct {
	AgentID string
	// Scaler is the scaler it was spawned for; a Backend whose
	// Config.Scaler is another one does not see it.
	Scaler string
	// Unverified makes its Backend unable to confirm it is its own (as a
	// PID whose process is another's): it is listed Unverified, and
	// StopOrphan refuses it.
	Unverified bool
}

// Leave starts l on the Host: it does nothing and runs until it is
// stopped (StopOrphan, or Destroy once a Backend recovered it). It
// returns the handle its spawn would have returned, for a test that
// saves it as a spawn record of the process that "crashed".
func (h *Host) Leave(l Leftover) scaler.Handle {
	r := h.start(&run{id: l.AgentID, scaler: l.Scaler, unverified: l.Unverified}, func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
	blob, _ := json.Marshal(record{V: 1, AgentID: l.AgentID})
	return scaler.Handle{AgentID: l.AgentID, Scaler: l.Scaler, Ref: l.AgentID, Blob: blob, SpawnedAt: r.started}
}

// Running reports whether the compute of agentID runs on the Host.
func (h *Host) Running(agentID string) bool {
	r := h.get(agentID)
	return r != nil && !r.ended()
}

// start runs main for r (its id, scaler, work dir, unverified and,
// when not zero, started set) in a goroutine until it returns or the run is cancelled.
func (h *Host) start(r *run, main func(context.Context) error) *run {
	ctx, cancel := context.WithCancel(context.Background())
	if r.started.IsZero() {
		r.started = time.Now()
	}
	r.cancel, r.done = cancel, make(chan struct{})
	h.mu.Lock()
	h.agents[r.id] = r
	h.mu.Unlock()
	go func() {
		defer close(r.done)
		defer cancel()
		r.err = main(ctx)
	}()
	return r
}

func (h *Host) get(id string) *run {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agents[id]
}

// list returns the Host's runs of scalerName ("" for every scaler's),
// ended ones included, by agent id.
func (h *Host) list(scalerName string) []*run {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*run
	for _, r := range h.agents {
		if scalerName == "" || r.scaler == scalerName {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *run) int { return strings.Compare(a.id, b.id) })
	return out
}

func (h *Host) remove(r *run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.agents[r.id] == r {
		delete(h.agents, r.id)
	}
}

func (r *run) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
