package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kici-dev/kici/internal/cluster/peer"
	"github.com/kici-dev/kici/internal/cluster/worker"
	"github.com/kici-dev/kici/internal/scaler"
)

// ErrNotConnected is returned by Request and Send for a worker that has
// no channel to this coordinator.
var ErrNotConnected = errors.New("worker not connected to this coordinator")

// recordBeat keeps a worker's last heartbeat, cut to the bounds a worker
// may advertise, while the channel it came on is the worker's current one.
// It reports whether the list of the worker's scaler agents changed.
func (h *Hub) recordBeat(id string, c *peer.Conn, hb worker.Heartbeat) bool {
	hb.Scalers = hb.Scalers[:min(len(hb.Scalers), worker.MaxOffers)]
	for i := range hb.Scalers {
		o := &hb.Scalers[i]
		o.LabelSets = o.LabelSets[:min(len(o.LabelSets), worker.MaxOfferLabelSets)]
		for j := range o.LabelSets {
			o.LabelSets[j] = o.LabelSets[j][:min(len(o.LabelSets[j]), worker.MaxOfferLabels)]
		}
		o.Mandatory = o.Mandatory[:min(len(o.Mandatory), worker.MaxOfferLabels)]
	}
	hb.ScalerAgents = hb.ScalerAgents[:min(len(hb.ScalerAgents), worker.MaxScalerAgents)]
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns[id] != c {
		return false
	}
	prev, had := h.beats[id]
	h.beats[id] = hb
	return !had || !slices.Equal(prev.ScalerAgents, hb.ScalerAgents)
}

// Heartbeats returns the last heartbeat of every worker connected here,
// by node id.
func (h *Hub) Heartbeats() map[string]worker.Heartbeat {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]worker.Heartbeat, len(h.beats))
	for id, hb := range h.beats {
		out[id] = hb
	}
	return out
}

// ScalerAgentOwner returns the connected worker whose last heartbeat
// lists agentID among its scalers' agents.
func (h *Hub) ScalerAgentOwner(agentID string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, hb := range h.beats {
		if slices.Contains(hb.ScalerAgents, agentID) {
			return id, true
		}
	}
	return "", false
}

func (h *Hub) conn(nodeID string) (*peer.Conn, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conns[nodeID]
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotConnected, nodeID)
	}
	return c, nil
}

// Request sends a request to a connected worker and returns its answer.
func (h *Hub) Request(ctx context.Context, nodeID, typ string, body any) (peer.Frame, error) {
	c, err := h.conn(nodeID)
	if err != nil {
		return peer.Frame{}, err
	}
	return c.Request(ctx, typ, body)
}

// Send sends a notice to a connected worker.
func (h *Hub) Send(ctx context.Context, nodeID, typ string, body any) error {
	c, err := h.conn(nodeID)
	if err != nil {
		return err
	}
	return c.Send(ctx, typ, body)
}

// handleScaler serves a worker's scaler frames; false if f is not one.
// Each is served from its own goroutine, at most maxWorkerRequests at a
// time per worker, so the channel keeps relaying meanwhile.
func (h *Hub) handleScaler(ctx context.Context, nodeID string, c *peer.Conn, sem chan struct{}, f peer.Frame) bool {
	switch f.Type {
	case worker.TypeOutboxEntry, worker.TypeScalerRetire, worker.TypeScalerCapacity:
	default:
		return false
	}
	rep := h.cfg.Scalers
	if rep == nil {
		if f.ID != "" {
			_ = c.Reply(ctx, f, nil, errors.New("this coordinator takes no scaler reports"))
		}
		return true
	}
	if f.Type == worker.TypeScalerCapacity {
		// A notice, quick and without an answer: never dropped for want
		// of a slot.
		go rep.CapacityFreed()
		return true
	}
	select {
	case sem <- struct{}{}:
	default:
		_ = c.Reply(ctx, f, nil, errors.New("the coordinator is busy with this worker's requests; try again"))
		return true
	}
	go func() {
		defer func() { <-sem }()
		switch f.Type {
		case worker.TypeScalerCapacity:
			rep.CapacityFreed()
		case worker.TypeScalerRetire:
			var req worker.RetireRequest
			if err := f.Decode(&req); err != nil || !scaler.IsScalerAgentID(req.AgentID) {
				_ = c.Reply(ctx, f, nil, fmt.Errorf("scaler.retire: a scaler agent id is needed"))
				return
			}
			_ = c.Reply(ctx, f, rep.Retire(req.AgentID), nil)
		case worker.TypeOutboxEntry:
			var e worker.OutboxEntry
			if err := f.Decode(&e); err != nil {
				_ = c.Reply(ctx, f, nil, err)
				return
			}
			ack, err := rep.ApplyOutbox(ctx, nodeID, e)
			if err != nil {
				h.log.Warn("outbox entry not applied; the worker sends it again", "node_id", nodeID, "seq", e.Seq, "kind", e.Kind, "error", err)
			}
			_ = c.Reply(ctx, f, ack, err)
		}
	}()
	return true
}
