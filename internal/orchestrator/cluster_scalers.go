package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kici-dev/kici/internal/api"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/cluster/coordinator"
	"github.com/kici-dev/kici/internal/cluster/worker"
	"github.com/kici-dev/kici/internal/dispatch"
	"github.com/kici-dev/kici/internal/metrics"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/config"
	"github.com/kici-dev/kici/internal/store"
)

// routeAcceptTimeout is how long a worker has to answer a job routed to
// its scalers; without an answer the coordinator takes the job back and
// may route it elsewhere. The job is only ever claimed through the
// dispatch queue, so two spawns for it never make two dispatches.
const routeAcceptTimeout = 15 * time.Second

// routeRefresh is how often a routed job's worker is asked again while the
// job waits: the answer (spawning, at capacity, deferred) is what the
// queue shows, and asking again is free (the worker's manager keeps one
// spawn per job).
const routeRefresh = 2 * time.Second

// routeRetryAfter is how long a worker that did not accept a job in time
// is not asked about it again.
const routeRetryAfter = time.Minute

// routeForget drops the routing of a job not asked about for this long:
// it left the queue.
const routeForget = 10 * time.Minute

// clusterScaler is a coordinator's dispatch.Scaler: its own scalers
// first, then the scalers its connected workers advertise. A job routed
// to a worker is spawned for there; the agent connects to the worker,
// which relays it here or to another coordinator, and registers with a
// token only that worker can check.
type clusterScaler struct {
	local    *scaler.Manager // nil without scalers of its own
	hub      *coordinator.Hub
	disp     *dispatch.Dispatcher
	log      *slog.Logger
	counters metrics.ClusterCounters

	mu     sync.Mutex
	routed map[string]*route // by job id
	owners map[string]string // scaler agent id -> worker node id
	pruned time.Time
}

// route is a job routed to a worker's scalers.
type route struct {
	node     string
	asked    time.Time // when the last request went out
	answered time.Time // zero until the worker first answered
	res      scaler.ScaleResult
	inflight bool
	// tried are the workers that did not accept the job in time, and
	// when: each is skipped for routeRetryAfter.
	tried map[string]time.Time
}

func newClusterScaler(local *scaler.Manager, hub *coordinator.Hub, disp *dispatch.Dispatcher, log *slog.Logger, counters metrics.ClusterCounters) *clusterScaler {
	return &clusterScaler{local: local, hub: hub, disp: disp, log: log, counters: counters,
		routed: map[string]*route{}, owners: map[string]string{}}
}

func (cs *clusterScaler) RequestScale(ctx context.Context, req scaler.ScaleRequest) scaler.ScaleResult {
	var localRes scaler.ScaleResult
	if cs.local != nil {
		localRes = cs.local.RequestScale(ctx, req)
		if localRes.Action != scaler.ActionNoMatch {
			return localRes
		}
	}
	beats := cs.hub.Heartbeats()
	now := time.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.pruneLocked(now)
	r := cs.routed[req.JobID]
	tried := map[string]time.Time{}
	if r != nil && r.node == "" {
		// Taken back before with nowhere else to go: route it afresh,
		// skipping the workers that failed it lately.
		tried, r = r.tried, nil
	}
	if r != nil {
		tried = r.tried
		_, up := beats[r.node]
		switch {
		case !up:
			cs.log.Info("worker of a routed job left; taking the job back", "job_id", req.JobID, "node_id", r.node)
			cs.counters.Reroutes.WithLabelValues("taken-back").Inc()
			r = nil
		case r.answered.IsZero() && now.Sub(r.asked) > routeAcceptTimeout:
			cs.log.Warn("worker did not accept a routed job in time; taking it back", "job_id", req.JobID, "node_id", r.node, "timeout", routeAcceptTimeout)
			cs.counters.Reroutes.WithLabelValues("taken-back").Inc()
			tried[r.node] = now
			r = nil
		case r.answered.IsZero():
			return scaler.ScaleResult{Action: scaler.ActionSkipped, Scaler: "@" + r.node, RetryAfter: time.Second,
				Reason: fmt.Sprintf("routed to worker %s; waiting for it to accept", r.node)}
		case r.res.Action == scaler.ActionNoMatch || (r.res.Action == scaler.ActionAtCapacity && cs.betterLocked(beats, req, r.node, tried)):
			// The worker lost the scaler, or another has room: route again.
			r = nil
		default:
			if !r.inflight && now.Sub(r.asked) >= routeRefresh {
				cs.askLocked(r, req, now)
			}
			return r.res
		}
	}
	skip := map[string]bool{}
	for id, at := range tried {
		if now.Sub(at) < routeRetryAfter {
			skip[id] = true
		} else {
			delete(tried, id)
		}
	}
	node := pickWorker(beats, req, skip)
	if node == "" {
		// Remember what was tried (the entry is pruned with the others),
		// so that a take-back is counted once.
		cs.routed[req.JobID] = &route{asked: now, tried: tried}
		if cs.local != nil {
			return localRes
		}
		return scaler.ScaleResult{Action: scaler.ActionNoMatch,
			Reason: fmt.Sprintf("no scaler of this coordinator or of a connected worker has a label set covering %v", scaler.NormalizeLabels(req.Labels))}
	}
	r = &route{node: node, tried: tried}
	cs.routed[req.JobID] = r
	cs.askLocked(r, req, now)
	cs.counters.Reroutes.WithLabelValues("asked").Inc()
	cs.log.Info("job routed to a worker's scalers", "job_id", req.JobID, "run_id", req.RunID, "node_id", node)
	return scaler.ScaleResult{Action: scaler.ActionSkipped, Scaler: "@" + node, RetryAfter: time.Second,
		Reason: fmt.Sprintf("routed to worker %s; waiting for it to accept", node)}
}

// pickWorker chooses the connected worker whose scalers cover the job:
// one with free capacity first, then any (it answers at-capacity, which
// the queue shows), skipping those that did not accept it in time; ties
// go to the sorted first, so every coordinator picks the same one.
func pickWorker(beats map[string]worker.Heartbeat, req scaler.ScaleRequest, skip map[string]bool) string {
	ids := make([]string, 0, len(beats))
	for id := range beats {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	best, bestFree := "", -1
	for _, id := range ids {
		if skip[id] {
			continue
		}
		for _, o := range beats[id].Scalers {
			if o.Covers(req.Labels, req.Exclude) && o.Free > bestFree {
				best, bestFree = id, o.Free
			}
		}
	}
	return best
}

// betterLocked reports whether a worker other than node covers the job
// with free capacity.
func (cs *clusterScaler) betterLocked(beats map[string]worker.Heartbeat, req scaler.ScaleRequest, node string, tried map[string]time.Time) bool {
	skip := map[string]bool{node: true}
	for id := range tried {
		skip[id] = true
	}
	id := pickWorker(beats, req, skip)
	if id == "" {
		return false
	}
	for _, o := range beats[id].Scalers {
		if o.Covers(req.Labels, req.Exclude) && o.Free > 0 {
			return true
		}
	}
	return false
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// askLocked sends the job's spawn request to its worker in the
// background; the answer lands in r.
func (cs *clusterScaler) askLocked(r *route, req scaler.ScaleRequest, now time.Time) {
	r.asked, r.inflight = now, true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), routeAcceptTimeout)
		defer cancel()
		f, err := cs.hub.Request(ctx, r.node, worker.TypeScalerSpawn, worker.SpawnRequest{JobID: req.JobID, RunID: req.RunID, Labels: req.Labels, Exclude: req.Exclude})
		var res scaler.ScaleResult
		if err == nil {
			err = f.Decode(&res)
		}
		cs.mu.Lock()
		r.inflight = false
		first := false
		if err != nil {
			cs.log.Warn("routed job's worker did not answer", "job_id", req.JobID, "node_id", r.node, "error", err)
		} else {
			first = r.answered.IsZero()
			res.Scaler += "@" + r.node
			r.res, r.answered = res, time.Now()
			if res.AgentID != "" {
				cs.owners[res.AgentID] = r.node
			}
		}
		cs.mu.Unlock()
		if first {
			cs.disp.JobsQueued() // the queue shows the answer at once
		}
	}()
}

func (cs *clusterScaler) pruneLocked(now time.Time) {
	if now.Sub(cs.pruned) < time.Minute {
		return
	}
	cs.pruned = now
	for id, r := range cs.routed {
		if now.Sub(r.asked) > routeForget {
			delete(cs.routed, id)
		}
	}
	if len(cs.owners) > 4*worker.MaxScalerAgents {
		cs.owners = map[string]string{} // the heartbeats name the owners again
	}
}

// OnAgentRegistered checks an agent connected directly: only this
// coordinator's scalers may have spawned it.
func (cs *clusterScaler) OnAgentRegistered(agentID, token string) (scaler.Registration, error) {
	return cs.OnAgentRegisteredVia(agentID, token, "")
}

// OnAgentRegisteredVia checks a registering agent with the scalers that
// may have spawned it: this coordinator's, then, for an agent a worker
// relays, that worker's (it checks the token it issued). A worker vouches
// only for agents it relays, so a compromised worker cannot register
// agents that connect anywhere else.
func (cs *clusterScaler) OnAgentRegisteredVia(agentID, token, via string) (scaler.Registration, error) {
	if cs.local != nil {
		reg, err := cs.local.OnAgentRegistered(agentID, token)
		if reg.Managed || (err != nil && !errors.Is(err, scaler.ErrUnknownScalerAgent)) {
			return reg, err
		}
	}
	if !scaler.IsScalerAgentID(agentID) {
		return scaler.Registration{}, nil
	}
	if via == "" {
		return scaler.Registration{}, fmt.Errorf("%w: %s (no scaler of this coordinator spawned it; a worker's scaler agents must connect through their worker)", scaler.ErrUnknownScalerAgent, agentID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	f, err := cs.hub.Request(ctx, via, worker.TypeScalerRegister, worker.RegisterRequest{AgentID: agentID, Token: token})
	cancel()
	var reg scaler.Registration
	if err == nil {
		err = f.Decode(&reg)
	}
	if err != nil || !reg.Managed {
		if err != nil && !worker.IsUnknownScalerAgent(err) {
			cs.log.Warn("ask a worker about a registering scaler agent", "agent_id", agentID, "node_id", via, "error", err)
		}
		return scaler.Registration{}, fmt.Errorf("%w: %s (worker %s, which relays it, did not spawn it)", scaler.ErrUnknownScalerAgent, agentID, via)
	}
	reg.Remote = true
	cs.mu.Lock()
	cs.owners[agentID] = via
	cs.mu.Unlock()
	return reg, nil
}

func (cs *clusterScaler) OnAgentDisconnected(agentID string) {
	if cs.local != nil {
		cs.local.OnAgentDisconnected(agentID)
	}
	cs.notify(agentID, worker.AgentDisconnected)
}

func (cs *clusterScaler) OnAgentBusy(agentID string) {
	if cs.local != nil {
		cs.local.OnAgentBusy(agentID)
	}
	cs.notify(agentID, worker.AgentBusy)
}

// notify tells the worker that spawned an agent what became of it.
func (cs *clusterScaler) notify(agentID, event string) {
	cs.mu.Lock()
	node, ok := cs.owners[agentID]
	if event == worker.AgentDisconnected {
		delete(cs.owners, agentID)
	}
	cs.mu.Unlock()
	if !ok {
		if node, ok = cs.hub.ScalerAgentOwner(agentID); !ok {
			return
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cs.hub.Send(ctx, node, worker.TypeScalerAgent, worker.AgentNotice{AgentID: agentID, Event: event}); err != nil {
			cs.log.Warn("tell a worker about its scaler agent", "agent_id", agentID, "node_id", node, "event", event, "error", err)
		}
	}()
}

// scalerReports applies what workers' scalers report (coordinator.
// ScalerReports): each outbox entry exactly once, in the same transaction
// as the stream's applied number, with the effects a local scaler's
// report has (the job's timeline, its provisioning error, the metrics).
type scalerReports struct {
	s        *Server
	counters metrics.ClusterCounters
}

// maxDetail bounds the text a worker's scaler event may carry, and
// maxPayload an entry's payload.
const (
	maxDetail  = 8 << 10
	maxPayload = 64 << 10
)

// skip applies a malformed entry as nothing: refusing it would make the
// worker send it again forever and hold up every entry after it.
func (r scalerReports) skip(ctx context.Context, nodeID string, e worker.OutboxEntry, why string) (worker.OutboxAck, error) {
	r.s.log.Warn("worker's outbox entry skipped", "node_id", nodeID, "seq", e.Seq, "kind", truncate(e.Kind, 64), "why", why, "bytes", len(e.Payload))
	_, applied, err := r.s.db.ApplyRelayed(ctx, e.OutboxID, e.Stream, nodeID, e.Seq, e.Prev, func(*store.Tx) error { return nil })
	if err != nil {
		r.counters.OutboxEntries.WithLabelValues("error").Inc()
		return worker.OutboxAck{}, err
	}
	r.counters.OutboxEntries.WithLabelValues("error").Inc()
	return worker.OutboxAck{Applied: applied, Verdict: "skipped"}, nil
}

func (r scalerReports) ApplyOutbox(ctx context.Context, nodeID string, e worker.OutboxEntry) (worker.OutboxAck, error) {
	if len(e.OutboxID) == 0 || len(e.OutboxID) > 64 || len(e.Stream) == 0 || len(e.Stream) > 64 {
		r.counters.OutboxEntries.WithLabelValues("error").Inc()
		return worker.OutboxAck{}, errors.New("outbox entry: an outbox id and a stream of 1 to 64 bytes are needed")
	}
	hb, ok := r.s.hub.Heartbeats()[nodeID]
	if !ok {
		// Its first heartbeat on this channel is still on its way.
		return worker.OutboxAck{}, fmt.Errorf("outbox entry %d: no heartbeat of worker %s yet; send it again", e.Seq, nodeID)
	}
	// A worker reports only on jobs its scalers could have been asked
	// for: anything else is dropped (and the stream moves on), so that a
	// compromised worker cannot write into other jobs.
	covered := func(job store.Job) bool {
		for _, o := range hb.Scalers {
			if o.Covers(job.RunsOn, nil) {
				return true
			}
		}
		r.s.log.Warn("worker's report on a job its scalers do not cover dropped", "node_id", nodeID, "job_id", job.ID, "seq", e.Seq)
		return false
	}
	var apply func(tx *store.Tx) error
	var after func()
	switch e.Kind {
	case worker.KindScalerEvent:
		var b worker.ScalerEventBody
		if len(e.Payload) > maxPayload || json.Unmarshal(e.Payload, &b) != nil || b.JobID == "" || b.Event.Type == "" || len(b.Event.Type) > 64 {
			return r.skip(ctx, nodeID, e, "malformed scaler event")
		}
		b.Event.Detail = truncate(b.Event.Detail, maxDetail)
		apply = func(tx *store.Tx) error {
			job, err := tx.GetJob(ctx, b.JobID)
			if errors.Is(err, store.ErrNotFound) {
				return nil // the run is gone: nothing to tell
			}
			if err != nil {
				return err
			}
			if !covered(job) {
				return nil
			}
			_, err = tx.AddJobEvent(ctx, store.JobEvent{JobID: job.ID, RunID: job.RunID, Type: b.Event.Type, AgentID: b.Event.AgentID,
				Detail: b.Event.Detail, CreatedAt: b.Event.Time})
			return err
		}
		after = func() {
			r.s.publisher().Publish(apiv1.Event{Kind: "scaler", RunID: b.RunID, JobID: b.JobID, EventType: b.Event.Type, AgentID: b.Event.AgentID, Detail: b.Event.Detail})
		}
	case worker.KindProvisioningFailed:
		var b worker.ProvisioningFailedBody
		if len(e.Payload) > maxPayload || json.Unmarshal(e.Payload, &b) != nil || b.JobID == "" {
			return r.skip(ctx, nodeID, e, "malformed provisioning error")
		}
		apply = func(tx *store.Tx) error {
			job, err := tx.GetJob(ctx, b.JobID)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if !covered(job) {
				return nil
			}
			_, err = tx.SetProvisioningError(ctx, b.JobID, truncate(b.Detail, maxDetail))
			if errors.Is(err, store.ErrNotFound) {
				return nil // no queue row: the job left the queue
			}
			return err
		}
		after = func() {}
	case worker.KindSpawnFailed:
		var b worker.SpawnFailedBody
		// The backend is a metric label: only the types a worker runs.
		if json.Unmarshal(e.Payload, &b) != nil || (b.Backend != config.TypeBareMetal && b.Backend != config.TypeContainer) {
			return r.skip(ctx, nodeID, e, "malformed spawn failure")
		}
		apply = func(*store.Tx) error { return nil }
		after = func() { r.s.metrics.ScalerSpawnFailures.WithLabelValues(b.Backend, fmt.Sprint(b.Bound)).Inc() }
	default:
		// Unknown to this version: applied as nothing, so the stream moves
		// on (a newer worker's report is not worth blocking the rest).
		apply = func(*store.Tx) error { return nil }
		after = func() {
			r.s.log.Warn("outbox entry of an unknown kind skipped", "node_id", nodeID, "kind", truncate(e.Kind, 64), "seq", e.Seq)
		}
	}
	v, applied, err := r.s.db.ApplyRelayed(ctx, e.OutboxID, e.Stream, nodeID, e.Seq, e.Prev, apply)
	if err != nil {
		r.counters.OutboxEntries.WithLabelValues("error").Inc()
		return worker.OutboxAck{}, err
	}
	ack := worker.OutboxAck{Applied: applied}
	switch v {
	case store.RelayApplied:
		after()
		ack.Verdict = "applied"
	case store.RelayDuplicate:
		ack.Verdict = "duplicate"
	case store.RelayGap:
		ack.Verdict = "gap"
	}
	r.counters.OutboxEntries.WithLabelValues(ack.Verdict).Inc()
	return ack, nil
}

func (r scalerReports) Retire(agentID string) worker.RetireReply {
	connected := false
	for _, a := range r.s.disp.Agents() {
		if a.ID == agentID {
			connected = true
			break
		}
	}
	if !connected {
		return worker.RetireReply{}
	}
	return worker.RetireReply{Connected: true, Retired: r.s.disp.RetireIdle(agentID)}
}

func (r scalerReports) CapacityFreed() { r.s.disp.JobsQueued() }

// workerOutboxDepths is the outbox depth each connected worker's last
// heartbeat reported.
func (s *Server) workerOutboxDepths() map[string]int {
	out := map[string]int{}
	if s.hub == nil {
		return out
	}
	for id, hb := range s.hub.Heartbeats() {
		out[id] = hb.OutboxDepth
	}
	return out
}

// clusterNodes serves the API's per-node scaler requests (api.NodeScalers)
// on a coordinator: its connected workers are asked over their channels,
// with this coordinator's trackers (its connected agents and the agents
// the shared dispatch queue binds to a job) so that the worker counts
// them as tracked.
type clusterNodes struct{ s *Server }

func (n clusterNodes) Self() string    { return n.s.self.ID }
func (n clusterNodes) Nodes() []string { return n.s.hub.Connected() }

func (n clusterNodes) ask(ctx context.Context, node string, req worker.OrphansRequest) (worker.OrphansReply, error) {
	if !slices.Contains(n.s.hub.Connected(), node) {
		return worker.OrphansReply{}, fmt.Errorf("%w: %s is not a worker connected to this coordinator", api.ErrUnknownNode, node)
	}
	for _, a := range n.s.disp.Agents() {
		req.Registered = append(req.Registered, a.ID)
	}
	bound, err := n.s.db.BoundAgents(ctx)
	if err != nil {
		return worker.OrphansReply{}, fmt.Errorf("read the dispatch queue's bound agents: %w", err)
	}
	for id := range bound {
		req.BoundJob = append(req.BoundJob, id)
	}
	ctx, cancel := context.WithTimeout(ctx, worker.OrphanTimeout)
	defer cancel()
	f, err := n.s.hub.Request(ctx, node, worker.TypeScalerOrphans, req)
	if err != nil {
		return worker.OrphansReply{}, err
	}
	var out worker.OrphansReply
	if err := f.Decode(&out); err != nil {
		return worker.OrphansReply{}, fmt.Errorf("worker %s answered: %w", node, err)
	}
	return out, nil
}

func (n clusterNodes) NodeOrphans(ctx context.Context, node string) ([]scaler.Orphan, error) {
	out, err := n.ask(ctx, node, worker.OrphansRequest{Op: "list"})
	if out.Orphans == nil {
		out.Orphans = []scaler.Orphan{}
	}
	return out.Orphans, err
}

func (n clusterNodes) NodeStopOrphans(ctx context.Context, node string, ids []string) ([]scaler.StopOutcome, error) {
	out, err := n.ask(ctx, node, worker.OrphansRequest{Op: "stop", IDs: ids})
	return out.Outcomes, err
}
