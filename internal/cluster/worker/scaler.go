package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/cluster/outbox"
	"github.com/kici-dev/kici/internal/cluster/peer"
	"github.com/kici-dev/kici/internal/scaler"
)

// Scaler messages. A coordinator routes a queued job that it cannot place
// to a worker whose heartbeat offers a matching scaler (TypeScalerSpawn);
// the worker's scaler spawns an agent that connects to the worker, which
// relays it to a coordinator like any of its agents. What the spawn does
// to the job (its events and provisioning error) travels back through the
// worker's outbox (TypeOutboxEntry), so a worker restart or a dropped
// channel loses none of it and applies none of it twice.
const (
	// TypeScalerSpawn (coordinator → worker, request): a SpawnRequest,
	// answered with the scaler.ScaleResult of the worker's manager.
	TypeScalerSpawn = "scaler.spawn"
	// TypeScalerRegister (coordinator → worker, request): a RegisterRequest
	// of an agent registering with a scaler token, answered with the
	// scaler.Registration; an agent the worker did not spawn is refused
	// with an error starting with scaler.ErrUnknownScalerAgent's text.
	TypeScalerRegister = "scaler.register"
	// TypeScalerAgent (coordinator → worker, notice): an AgentNotice.
	TypeScalerAgent = "scaler.agent"
	// TypeScalerOrphans (coordinator → worker, request): an
	// OrphansRequest, answered with an OrphansReply.
	TypeScalerOrphans = "scaler.orphans"
	// TypeScalerRetire (worker → coordinator, request): a RetireRequest,
	// answered with a RetireReply.
	TypeScalerRetire = "scaler.retire"
	// TypeScalerCapacity (worker → coordinator, notice): a spawn ended or
	// an agent left; jobs waiting for capacity may be offered again.
	TypeScalerCapacity = "scaler.capacity"
	// TypeOutboxEntry (worker → coordinator, request): an OutboxEntry,
	// answered with an OutboxAck once applied (or found applied before).
	TypeOutboxEntry = "outbox.entry"
)

// Kinds of outbox entries: what a worker's scaler reports.
const (
	KindScalerEvent        = "scaler.event"
	KindProvisioningFailed = "scaler.provisioning_failed"
	KindSpawnFailed        = "scaler.spawn_failed"
)

// scalerStream is the outbox stream of a worker's scaler reports. One
// stream keeps them in order for every coordinator: they share one
// database, so whichever coordinator applies an entry applies it for all.
const scalerStream = "scaler"

// OrphanTimeout bounds a coordinator's orphan request to a worker: a stop
// waits out the compute's stop grace.
const OrphanTimeout = 240 * time.Second

// Bounds on what a worker advertises, so that a heartbeat stays small and
// a compromised worker cannot make a coordinator hold much.
const (
	MaxOffers         = 64
	MaxOfferLabelSets = 64
	MaxOfferLabels    = 64
	MaxScalerAgents   = 4096
)

// SpawnRequest asks a worker's scalers for an agent bound to a job.
type SpawnRequest struct {
	JobID   string   `json:"job_id"`
	RunID   string   `json:"run_id"`
	Labels  []string `json:"labels"`
	Exclude []string `json:"exclude,omitempty"`
}

// RegisterRequest checks a registering agent's scaler token.
type RegisterRequest struct {
	AgentID string `json:"agent_id"`
	Token   string `json:"token"`
}

// AgentNotice tells a worker what became of one of its scaler agents on
// the coordinator: it took a job ("busy") or left ("disconnected").
type AgentNotice struct {
	AgentID string `json:"agent_id"`
	Event   string `json:"event"`
}

// Events of an AgentNotice.
const (
	AgentBusy         = "busy"
	AgentDisconnected = "disconnected"
)

// OrphansRequest lists ("list") or stops ("stop", with IDs) a worker's
// scaler compute. Registered and BoundJob are the coordinators' trackers:
// the agents connected to the asking coordinator and those its dispatch
// queue binds to a job, so that the worker counts them as tracked.
type OrphansRequest struct {
	Op         string   `json:"op"`
	IDs        []string `json:"ids,omitempty"`
	Registered []string `json:"registered,omitempty"`
	BoundJob   []string `json:"bound_job,omitempty"`
}

// OrphansReply answers an OrphansRequest.
type OrphansReply struct {
	Orphans  []scaler.Orphan      `json:"orphans,omitempty"`
	Outcomes []scaler.StopOutcome `json:"outcomes,omitempty"`
}

// RetireRequest asks a coordinator to stop an idle agent relayed to it
// from taking jobs, so that the worker's scaler can destroy it.
type RetireRequest struct {
	AgentID string `json:"agent_id"`
}

// RetireReply answers a RetireRequest: Connected says whether the agent
// is connected to that coordinator, Retired whether it is now retired
// (false: it holds a job and must be kept).
type RetireReply struct {
	Connected bool `json:"connected"`
	Retired   bool `json:"retired"`
}

// OutboxEntry is one outbox entry relayed to a coordinator.
type OutboxEntry struct {
	OutboxID string          `json:"outbox_id"`
	Stream   string          `json:"stream"`
	Seq      uint64          `json:"seq"`
	Prev     uint64          `json:"prev"`
	Kind     string          `json:"kind"`
	Payload  json.RawMessage `json:"payload"`
}

// OutboxAck says up to which sequence number the stream is applied.
type OutboxAck struct {
	Applied uint64 `json:"applied"`
	Verdict string `json:"verdict"`
}

// ScalerEventBody is the payload of a KindScalerEvent entry.
type ScalerEventBody struct {
	RunID string       `json:"run_id"`
	JobID string       `json:"job_id"`
	Event scaler.Event `json:"event"`
}

// ProvisioningFailedBody is the payload of a KindProvisioningFailed entry.
type ProvisioningFailedBody struct {
	JobID  string `json:"job_id"`
	Detail string `json:"detail"`
}

// SpawnFailedBody is the payload of a KindSpawnFailed entry.
type SpawnFailedBody struct {
	Backend string `json:"backend"`
	Bound   bool   `json:"bound"`
}

// Scalers is what a worker needs of its scaler manager (a
// *scaler.Manager).
type Scalers interface {
	RequestScale(ctx context.Context, req scaler.ScaleRequest) scaler.ScaleResult
	OnAgentRegistered(agentID, token string) (scaler.Registration, error)
	OnAgentDisconnected(agentID string)
	OnAgentBusy(agentID string)
	Orphans(ctx context.Context) ([]scaler.Orphan, error)
	StopOrphans(ctx context.Context, ids []string) ([]scaler.StopOutcome, error)
	Offers() []scaler.Offer
	AgentIDs() []string
}

// SetScalers connects the worker's scaler manager and the outbox its
// reports go through; call it before Run. Without it the worker offers no
// scaler and refuses scaler requests.
func (w *Worker) SetScalers(s Scalers, ob *outbox.Outbox) {
	w.mu.Lock()
	w.scalers, w.outbox = s, ob
	w.mu.Unlock()
}

func (w *Worker) scalerHost() Scalers {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.scalers
}

// inventory fills a heartbeat's scaler part.
func (w *Worker) inventory(hb *Heartbeat) {
	w.mu.Lock()
	s, ob := w.scalers, w.outbox
	w.mu.Unlock()
	if ob != nil {
		hb.OutboxDepth, _ = ob.Depth()
	}
	if s == nil {
		return
	}
	hb.Scalers = s.Offers()
	hb.ScalerAgents = s.AgentIDs()
}

// handleScaler serves a coordinator's scaler frame; false if f is not
// one. Requests that may take long (orphan stops) are answered from their
// own goroutine, so the channel keeps relaying meanwhile; at most
// maxScalerRequests are served at once.
func (w *Worker) handleScaler(ctx context.Context, s *session, f peer.Frame) bool {
	switch f.Type {
	case TypeScalerSpawn, TypeScalerRegister, TypeScalerOrphans, TypeScalerAgent:
	default:
		return false
	}
	host := w.scalerHost()
	if host == nil && f.Type == TypeScalerOrphans {
		_ = s.conn.Reply(ctx, f, noScalerOrphans(f), nil)
		return true
	}
	if host == nil {
		if f.ID != "" {
			_ = s.conn.Reply(ctx, f, nil, errors.New("this worker runs no scaler"))
		}
		return true
	}
	if f.ID == "" {
		// A notice has no answer to say "busy" with: it waits for a slot
		// (it is quick once it has one) rather than being lost.
		go func() {
			select {
			case s.scalerSem <- struct{}{}:
			case <-ctx.Done():
				return
			case <-s.conn.Done():
				return
			}
			defer func() { <-s.scalerSem }()
			_, _ = w.serveScaler(ctx, host, f)
		}()
		return true
	}
	select {
	case s.scalerSem <- struct{}{}:
	default:
		_ = s.conn.Reply(ctx, f, nil, errors.New("the worker is busy with other scaler requests; try again"))
		return true
	}
	go func() {
		defer func() { <-s.scalerSem }()
		body, err := w.serveScaler(ctx, host, f)
		if f.ID != "" {
			_ = s.conn.Reply(ctx, f, body, err)
		}
	}()
	return true
}

func (w *Worker) serveScaler(ctx context.Context, host Scalers, f peer.Frame) (any, error) {
	switch f.Type {
	case TypeScalerSpawn:
		var req SpawnRequest
		if err := f.Decode(&req); err != nil {
			return nil, err
		}
		if req.JobID == "" || len(req.Labels) > MaxOfferLabels || len(req.Exclude) > MaxOfferLabels {
			return nil, errors.New("scaler.spawn: a job id and at most 64 labels and exclusions are needed")
		}
		res := host.RequestScale(ctx, scaler.ScaleRequest{JobID: req.JobID, RunID: req.RunID, Labels: req.Labels, Exclude: req.Exclude})
		w.log.Debug("scale request from coordinator", "job_id", req.JobID, "action", res.Action, "scaler", res.Scaler, "agent_id", res.AgentID)
		return res, nil
	case TypeScalerRegister:
		var req RegisterRequest
		if err := f.Decode(&req); err != nil {
			return nil, err
		}
		return host.OnAgentRegistered(req.AgentID, req.Token)
	case TypeScalerAgent:
		var n AgentNotice
		if err := f.Decode(&n); err != nil {
			return nil, err
		}
		switch n.Event {
		case AgentBusy:
			host.OnAgentBusy(n.AgentID)
		case AgentDisconnected:
			host.OnAgentDisconnected(n.AgentID)
		}
		return nil, nil
	case TypeScalerOrphans:
		var req OrphansRequest
		if err := f.Decode(&req); err != nil {
			return nil, err
		}
		octx, cancel := context.WithTimeout(ctx, OrphanTimeout)
		defer cancel()
		octx = withTrackers(octx, req.Registered, req.BoundJob)
		switch req.Op {
		case "list":
			list, err := host.Orphans(octx)
			return OrphansReply{Orphans: list}, err
		case "stop":
			if err := scaler.ValidateOrphanIDs(req.IDs); err != nil {
				return nil, err
			}
			out, err := host.StopOrphans(octx, req.IDs)
			return OrphansReply{Outcomes: out}, err
		}
		return nil, fmt.Errorf("scaler.orphans: unknown op %q (want list or stop)", req.Op)
	}
	return nil, nil
}

// noScalerOrphans answers an orphan request on a worker without scalers:
// an empty list, or "not-found" for every id to stop.
func noScalerOrphans(f peer.Frame) OrphansReply {
	var req OrphansRequest
	_ = f.Decode(&req)
	out := OrphansReply{Orphans: []scaler.Orphan{}}
	if req.Op == "stop" {
		for _, id := range req.IDs[:min(len(req.IDs), 256)] {
			out.Outcomes = append(out.Outcomes, scaler.StopOutcome{ID: id, Outcome: scaler.OutcomeNotFound, Error: "this worker runs no scaler"})
		}
	}
	return out
}

type trackersKey struct{}

type trackerSets struct{ registered, boundJob map[string]bool }

func withTrackers(ctx context.Context, registered, boundJob []string) context.Context {
	t := trackerSets{registered: map[string]bool{}, boundJob: map[string]bool{}}
	for _, id := range registered {
		t.registered[id] = true
	}
	for _, id := range boundJob {
		t.boundJob[id] = true
	}
	return context.WithValue(ctx, trackersKey{}, t)
}

// Trackers is the scaler manager's Config.Trackers on a worker: the
// coordinators' view that came with the orphan request being served. Any
// other reading has none, and the manager then counts every compute as
// tracked, so that nothing is stopped on a guess.
func Trackers(ctx context.Context) (registered, boundJob map[string]bool, err error) {
	t, ok := ctx.Value(trackersKey{}).(trackerSets)
	if !ok {
		return nil, nil, errors.New("no coordinator's trackers with this request")
	}
	return t.registered, t.boundJob, nil
}

// Sink returns the scaler.Sink of the worker's manager: what a spawn
// means for its job goes into the outbox, for the coordinators to apply;
// capacity notices go to every connected coordinator.
func (w *Worker) Sink() scaler.Sink { return workerSink{w} }

type workerSink struct{ w *Worker }

// maxReportDetail bounds the text of a report, well under what a
// coordinator accepts, so that no report is refused for good (and holds
// up the ones after it).
const maxReportDetail = 8 << 10

func clip(s string) string {
	if len(s) <= maxReportDetail {
		return s
	}
	return strings.ToValidUTF8(s[:maxReportDetail], "")
}

func (s workerSink) ScalerEvent(runID, jobID string, ev scaler.Event) {
	if jobID == "" {
		return // a warm agent's event: no job to tell
	}
	ev.Detail = clip(ev.Detail)
	s.w.report(KindScalerEvent, ScalerEventBody{RunID: runID, JobID: jobID, Event: ev})
}

func (s workerSink) ProvisioningFailed(jobID, detail string) {
	s.w.report(KindProvisioningFailed, ProvisioningFailedBody{JobID: jobID, Detail: clip(detail)})
}

func (s workerSink) SpawnFailed(backend string, bound bool) {
	s.w.report(KindSpawnFailed, SpawnFailedBody{Backend: backend, Bound: bound})
}

func (s workerSink) CapacityFreed() {
	for _, ss := range s.w.allSessions() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = ss.conn.Send(ctx, TypeScalerCapacity, struct{}{})
		cancel()
	}
}

func (s workerSink) SpawnRefused(string, string)            {}
func (s workerSink) AgentProvisioned(string, time.Duration) {}

// RetireAgent asks every connected coordinator; the agent is retired
// unless one that holds it says it holds a job (or cannot be asked).
func (s workerSink) RetireAgent(agentID string) bool {
	for _, ss := range s.w.allSessions() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		f, err := ss.conn.Request(ctx, TypeScalerRetire, RetireRequest{AgentID: agentID})
		cancel()
		if err != nil {
			return false
		}
		var r RetireReply
		if err := f.Decode(&r); err != nil || (r.Connected && !r.Retired) {
			return false
		}
	}
	return true
}

func (w *Worker) allSessions() []*session {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*session, 0, len(w.sessions))
	for _, s := range w.sessions {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].base < out[j].base })
	return out
}

// report appends a scaler report to the outbox and wakes the sender. An
// outbox that refuses it (full, closed) is logged: the job then waits out
// its queue timeout instead of showing the report.
func (w *Worker) report(kind string, body any) {
	w.mu.Lock()
	ob := w.outbox
	w.mu.Unlock()
	if ob == nil {
		return
	}
	data, err := json.Marshal(body)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = ob.Append(ctx, scalerStream, kind, data)
		cancel()
	}
	if err != nil {
		w.log.Error("scaler report not kept in the outbox", "kind", kind, "error", err)
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// relayOutbox sends the outbox's entries, in order, to a connected
// coordinator and drops each once acknowledged, until ctx ends. It runs
// when woken by a new entry or a new channel, and every second while
// entries wait (a coordinator that failed to apply one is asked again).
func (w *Worker) relayOutbox(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		w.mu.Lock()
		ob := w.outbox
		w.mu.Unlock()
		for ob != nil && ctx.Err() == nil {
			if n, _ := ob.Depth(); n == 0 {
				break
			}
			sent, err := w.sendPending(ctx, ob)
			if err != nil && ctx.Err() == nil {
				w.log.Warn("outbox relay paused", "error", err)
			}
			// After a full batch more may wait: send on at once.
			if err != nil || sent < sendBatch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// sendBatch is how many entries sendPending reads at a time.
const sendBatch = 256

// sendPending sends what the outbox holds, up to sendBatch entries, and
// returns how many went out.
func (w *Worker) sendPending(ctx context.Context, ob *outbox.Outbox) (int, error) {
	sessions := w.allSessions()
	if len(sessions) == 0 {
		return 0, nil // sent once a channel is up
	}
	entries, err := ob.Pending(ctx, scalerStream, 0, sendBatch)
	if err != nil {
		return 0, err
	}
	var lastErr error
	for _, s := range sessions {
		lastErr = w.sendEntries(ctx, ob, s, entries)
		if lastErr == nil {
			return len(entries), nil
		}
	}
	return 0, lastErr
}

func (w *Worker) sendEntries(ctx context.Context, ob *outbox.Outbox, s *session, entries []outbox.Entry) error {
	for _, e := range entries {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		f, err := s.conn.Request(rctx, TypeOutboxEntry, OutboxEntry{OutboxID: ob.ID(), Stream: e.Stream, Seq: e.Seq, Prev: e.Prev,
			Kind: e.Kind, Payload: e.Payload})
		cancel()
		if err != nil {
			return fmt.Errorf("entry %d to coordinator %s: %w", e.Seq, s.conn.PeerID(), err)
		}
		var ack OutboxAck
		if err := f.Decode(&ack); err != nil {
			return err
		}
		if ack.Applied > 0 {
			if _, err := ob.Ack(ctx, e.Stream, ack.Applied); err != nil {
				return err
			}
		}
		if ack.Applied < e.Seq {
			// A gap: the coordinator misses an earlier entry; the next
			// round starts again from the oldest one kept.
			return fmt.Errorf("coordinator %s applied up to %d, not %d (%s)", s.conn.PeerID(), ack.Applied, e.Seq, ack.Verdict)
		}
	}
	return nil
}

// IsUnknownScalerAgent reports whether err (a worker's refusal of a
// TypeScalerRegister) says the agent is not one of its scaler's.
func IsUnknownScalerAgent(err error) bool {
	var re *peer.RemoteError
	return errors.As(err, &re) && strings.HasPrefix(re.Message, scaler.ErrUnknownScalerAgent.Error())
}
