package dispatch

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kici-dev/kici/internal/protocol"
)

// Conn is what the dispatcher needs of an agent's connection.
type Conn interface {
	// Send writes one message; it fails once the connection is gone.
	Send(ctx context.Context, m protocol.Message) error
	// Close ends the connection with a WebSocket close code.
	Close(code int, reason string)
}

// Agent is one connected agent.
type Agent struct {
	// Via is the cluster worker that relays a scaler agent's connection;
	// empty for an agent connected directly.
	Via         string
	ID          string
	Labels      []string
	Capacity    int
	Version     string
	Hostname    string
	Backend     string
	OneShot     bool
	ConnectedAt time.Time
	// TokenID is the ID of the agent token the agent authenticated with;
	// empty for scaler agents and under KICI_AGENT_AUTH=none. Revoking the
	// token disconnects the agent (see DisconnectToken).
	TokenID string
	// TokenExpires is when that token expires; nil for never. The agent is
	// disconnected when it does.
	TokenExpires *time.Time
	// Credential names what the agent authenticated with, as the agent id
	// binding compares it: "token:<id>" for an agent token, "scaler" for a
	// scaler agent's single-use token, "" (none) under KICI_AGENT_AUTH=none.
	// A registration of an id bound to another credential is refused while
	// the bound agent is connected or holds a job (see Dispatcher.Register).
	Credential string
	// Features are the optional protocol behaviours the agent announced
	// (register's features); see AgentSupports.
	Features []string
	conn     Conn

	mu       sync.Mutex
	boundJob string          // the job a scaler spawned this agent for, until claimed
	managed  bool            // spawned by a scaler: its compute is destroyed when it disconnects, so it never comes back
	remote   bool            // managed, by a cluster worker's scaler: its compute outlives a dropped connection
	busy     map[string]bool // job ids this agent holds
	acked    map[string]bool // held jobs whose job.ack from this connection is committed (see noteAcked)
	reserved int             // slots held by claims not yet committed (see reserve)
	done     bool            // takes no more jobs: a one-shot agent that took its job, or a closing connection
	kicked   bool            // its connection is being closed for its token
	draining bool            // an operator drained it: no new job (see Dispatcher.Drain)
}

// NewAgent describes a registering agent.
func NewAgent(reg *protocol.Register, conn Conn, backend string, now time.Time) *Agent {
	labels := slices.Clone(reg.Labels)
	sort.Strings(labels)
	return &Agent{
		ID: reg.AgentID, Labels: labels, Capacity: max(1, reg.Concurrency), Version: reg.Version,
		Hostname: reg.Hostname, Backend: backend, OneShot: reg.OneShot, ConnectedAt: now,
		Features: slices.Clone(reg.Features), conn: conn, busy: map[string]bool{}, acked: map[string]bool{},
	}
}

// BusyJobs returns the jobs the agent holds, sorted.
func (a *Agent) BusyJobs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.busy))
	for j := range a.busy {
		out = append(out, j)
	}
	sort.Strings(out)
	return out
}

func (a *Agent) free() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done || a.draining {
		return 0
	}
	return a.Capacity - len(a.busy) - a.reserved
}

// reserve holds one of the agent's free slots for a claim about to be
// made, so that two claims (the dispatch loop's and one in a run's
// creating transaction) never give the agent more jobs than it takes. It
// reports false when no slot is free. A reservation ends with takeReserved
// (the claim committed) or unreserve (it did not).
func (a *Agent) reserve() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done || a.draining || a.Capacity-len(a.busy)-a.reserved <= 0 {
		return false
	}
	a.reserved++
	return true
}

func (a *Agent) unreserve() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reserved > 0 {
		a.reserved--
	}
}

// takeReserved turns a reservation into the job it claimed.
func (a *Agent) takeReserved(jobID string) {
	a.mu.Lock()
	if a.reserved > 0 {
		a.reserved--
	}
	a.mu.Unlock()
	a.take(jobID)
}

func (a *Agent) setDraining(on bool) {
	a.mu.Lock()
	a.draining = on
	a.mu.Unlock()
}

// Draining reports whether an operator drained the agent.
func (a *Agent) Draining() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining
}

func (a *Agent) hasBound() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.boundJob != ""
}

// takeBound returns the agent's bound job once.
func (a *Agent) takeBound() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.boundJob
	a.boundJob = ""
	return j
}

// kick retires the agent and closes its connection with code and reason,
// once; it reports whether this call did it.
func (a *Agent) kick(code int, reason string) bool {
	a.mu.Lock()
	if a.kicked {
		a.mu.Unlock()
		return false
	}
	a.kicked, a.done = true, true
	a.mu.Unlock()
	a.conn.Close(code, reason)
	return true
}

// retire stops the agent from taking more jobs: its connection is being
// closed, and a dispatch sent on it now would be lost.
func (a *Agent) retire() {
	a.mu.Lock()
	a.done = true
	a.mu.Unlock()
}

func (a *Agent) take(jobID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.busy[jobID] = true
	delete(a.acked, jobID) // a new dispatch: its ack is to come
	if a.OneShot {
		a.done = true
	}
}

func (a *Agent) release(jobID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	had := a.busy[jobID]
	delete(a.busy, jobID)
	delete(a.acked, jobID)
	return had
}

// noteAcked records that the job.ack of a job the agent holds was applied
// and committed: the queue row's ack deadline is cleared, so the job's
// running report need not clear it again.
func (a *Agent) noteAcked(jobID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.busy[jobID] {
		a.acked[jobID] = true
	}
}

// wasAcked reports noteAcked.
func (a *Agent) wasAcked(jobID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked[jobID]
}

func (a *Agent) holds(jobID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.busy[jobID]
}

// idLocks serialises the registrations of one agent id, so that checking
// who the id belongs to and taking it over happen as one step.
type idLocks struct {
	mu sync.Mutex
	m  map[string]*idLock
}

type idLock struct {
	mu    sync.Mutex
	users int
}

// lock locks id and returns the unlock function.
func (l *idLocks) lock(id string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*idLock{}
	}
	e := l.m[id]
	if e == nil {
		e = &idLock{}
		l.m[id] = e
	}
	e.users++
	l.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		if e.users--; e.users == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}

// registry is the set of connected agents by id.
type registry struct {
	mu     sync.Mutex
	agents map[string]*Agent
}

func (r *registry) add(a *Agent) (old *Agent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.agents[a.ID]
	r.agents[a.ID] = a
	return old
}

// remove drops a, unless a newer connection of the same id replaced it.
func (r *registry) remove(a *Agent) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.agents[a.ID] != a {
		return false
	}
	delete(r.agents, a.ID)
	return true
}

func (r *registry) get(id string) *Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agents[id]
}

// list returns the agents sorted by id, so matching is deterministic: the
// lowest id among fitting agents gets a job first.
func (r *registry) list() []*Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Agent, 0, len(r.agents))
	for _, a := range r.agents {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DisconnectToken closes the connection of every agent that authenticated
// with the agent token tokenID, with close code CloseTokenRevoked, and
// returns how many it closed. Their jobs get the recovery window, as after
// any disconnect; the agents cannot come back with the same token.
func (d *Dispatcher) DisconnectToken(tokenID, reason string) int {
	if tokenID == "" {
		return 0
	}
	n := 0
	for _, a := range d.reg.list() {
		if a.TokenID != tokenID {
			continue
		}
		a.kick(protocol.CloseTokenRevoked, reason)
		n++
	}
	if n > 0 {
		d.log.Warn("agents disconnected: token revoked", "token_id", tokenID, "agents", n)
	}
	return n
}

// sweepExpiredTokens disconnects the agents whose token has expired.
func (d *Dispatcher) sweepExpiredTokens() {
	now := d.cfg.Now()
	for _, a := range d.reg.list() {
		if a.TokenExpires == nil || a.TokenExpires.After(now) {
			continue
		}
		if !a.kick(protocol.CloseTokenRevoked, "agent token expired") {
			continue
		}
		d.log.Warn("agent disconnected: token expired", "agent_id", a.ID, "token_id", a.TokenID)
	}
}

// anyBusy reports whether a connected agent holds a job.
func (r *registry) anyBusy() bool {
	r.mu.Lock()
	agents := make([]*Agent, 0, len(r.agents))
	for _, a := range r.agents {
		agents = append(agents, a)
	}
	r.mu.Unlock()
	for _, a := range agents {
		a.mu.Lock()
		n := len(a.busy)
		a.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}
