package fake

import (
	"context"
	"sync"
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
	workDir string
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // main's result, once done is closed
}

// start runs main in a goroutine until it returns or the run is cancelled.
func (h *Host) start(id, workDir string, main func(context.Context) error) *run {
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{id: id, workDir: workDir, cancel: cancel, done: make(chan struct{})}
	h.mu.Lock()
	h.agents[id] = r
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
