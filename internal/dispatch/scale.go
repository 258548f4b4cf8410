package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/protocol"
	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/workflow"
)

// Scaler is what the dispatcher needs of the auto-scaler.
type Scaler interface {
	RequestScale(ctx context.Context, req scaler.ScaleRequest) scaler.ScaleResult
	OnAgentRegistered(agentID, token string) (scaler.Registration, error)
	OnAgentDisconnected(agentID string)
	OnAgentBusy(agentID string)
}

// ViaScaler is implemented by a Scaler whose agents may reach the
// dispatcher through a cluster worker: it is told which worker relays a
// registering agent ("" for a direct connection), so that only the worker
// that spawned an agent may vouch for it.
type ViaScaler interface {
	OnAgentRegisteredVia(agentID, token, via string) (scaler.Registration, error)
}

// RetireIdle stops an idle agent from taking jobs, so that the scaler can
// destroy it, and reports whether it did; an agent holding a job is left
// alone. An agent that is not connected counts as retired.
func (d *Dispatcher) RetireIdle(agentID string) bool {
	a := d.reg.get(agentID)
	if a == nil {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.busy) > 0 {
		return false
	}
	a.done = true
	return true
}

// RefusedError is a registration the dispatcher refuses, with the close
// code that tells the agent why.
type RefusedError struct {
	Code   int
	Reason string
}

func (e *RefusedError) Error() string { return e.Reason }

// SetScaler connects the auto-scaler: queued jobs no connected agent can
// take are offered to it, and its agents are bound to their jobs.
func (d *Dispatcher) SetScaler(s Scaler) {
	d.mu.Lock()
	d.scaler = s
	d.mu.Unlock()
}

// ScaleStatus is the last answer of the scaler for a queued job.
type ScaleStatus struct {
	scaler.ScaleResult
	At time.Time
}

// ScaleStatusOf returns the scaler's last answer for a job, if it was
// offered to the scaler.
func (d *Dispatcher) ScaleStatusOf(jobID string) (ScaleStatus, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, ok := d.scaled[jobID]
	return st, ok
}

// registerScaled asks the scaler manager about a registering agent: one it
// spawned serves the labels of its label set, is one-shot, and is bound to
// its job.
func (d *Dispatcher) registerScaled(a *Agent, token string) error {
	if d.scaler == nil {
		if scaler.IsScalerAgentID(a.ID) {
			return &RefusedError{Code: protocol.CloseUnknownScalerAgent, Reason: "no auto-scaler is configured, so no scaler agent is expected"}
		}
		return nil
	}
	var reg scaler.Registration
	var err error
	if vs, ok := d.scaler.(ViaScaler); ok {
		reg, err = vs.OnAgentRegisteredVia(a.ID, token, a.Via)
	} else {
		reg, err = d.scaler.OnAgentRegistered(a.ID, token)
	}
	if errors.Is(err, scaler.ErrUnknownScalerAgent) {
		return &RefusedError{Code: protocol.CloseUnknownScalerAgent, Reason: err.Error()}
	}
	if err != nil {
		return err
	}
	if !reg.Managed {
		if token != "" {
			return &RefusedError{Code: protocol.CloseUnauthorized, Reason: "scaler token for an agent the scaler did not spawn"}
		}
		return nil
	}
	labels := slices.Clone(reg.Labels)
	for _, l := range a.Labels {
		if strings.HasPrefix(l, "kici:os:") || strings.HasPrefix(l, "kici:arch:") {
			labels = append(labels, l)
		}
	}
	slices.Sort(labels)
	a.Labels = slices.Compact(labels)
	a.Backend = reg.Backend
	a.OneShot = true
	a.managed = true
	a.remote = reg.Remote
	a.boundJob = reg.BoundJobID
	return nil
}

// scaleQueued offers the scaler every pending job that no free connected
// agent covers. The manager ignores a job it is already spawning for.
func (d *Dispatcher) scaleQueued(ctx context.Context) {
	d.mu.Lock()
	s := d.scaler
	d.mu.Unlock()
	if s == nil {
		return
	}
	rows, err := d.db.ListQueue(ctx)
	if err != nil {
		d.log.Error("list queue for the scaler failed", "error", err)
		return
	}
	agents := d.reg.list()
	live := map[string]bool{}
	held := d.heldBack(ctx, rows) // an agent could not take them yet
	for _, r := range rows {
		if r.Status != store.QueuePending {
			continue
		}
		live[r.JobID] = true
		if held[r.JobID] || freeAgentCovers(agents, r.Labels) {
			continue
		}
		res := s.RequestScale(ctx, scaler.ScaleRequest{JobID: r.JobID, RunID: r.RunID, Labels: r.Labels})
		if res.FailJob {
			// Its scaler failed too often in a row to keep the job waiting
			// out the queue timeout: it fails now, with the cause.
			d.log.Warn("job failed: its scaler keeps failing", "job_id", r.JobID, "run_id", r.RunID, "scaler", res.Scaler, "reason", res.Reason)
			d.endJobIf(ctx, r.JobID, store.JobFailure, res.Reason, workflow.RetryInfrastructure, stillQueued(ctx, r.JobID))
			delete(live, r.JobID)
			continue
		}
		d.mu.Lock()
		prev, had := d.scaled[r.JobID]
		if !had || prev.Action != res.Action || prev.AgentID != res.AgentID {
			d.scaled[r.JobID] = ScaleStatus{ScaleResult: res, At: d.cfg.Now()}
		}
		d.mu.Unlock()
		// A deferral is the scaler's state, not the job's: the job's
		// provisioning error is only ever what a scaler.failed event bound
		// to it said (the scaler sink records that). The queue shows the
		// deferral from d.scaled while the job waits.
		if res.Action == scaler.ActionSpawning && (!had || prev.AgentID != res.AgentID) {
			d.log.Info("agent requested from scaler", "job_id", r.JobID, "run_id", r.RunID, "scaler", res.Scaler, "agent_id", res.AgentID)
		}
	}
	d.mu.Lock()
	for id := range d.scaled {
		if !live[id] {
			delete(d.scaled, id)
		}
	}
	d.mu.Unlock()
}

// stillQueued is an endJobIf condition: the job still waits in the queue
// (no agent took it since it was listed).
func stillQueued(ctx context.Context, jobID string) func(tx *store.Tx) (bool, error) {
	return func(tx *store.Tx) (bool, error) {
		job, err := tx.GetJob(ctx, jobID)
		if err != nil {
			return false, err
		}
		return job.Status == store.JobQueued, nil
	}
}

func freeAgentCovers(agents []*Agent, labels []string) bool {
	for _, a := range agents {
		if a.free() > 0 && !a.hasBound() && covers(a.Labels, labels) {
			return true
		}
	}
	return false
}

func covers(have, need []string) bool {
	for _, n := range need {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}

// Why words the scaler's last answer for a job.
func (st ScaleStatus) Why() string {
	switch st.Action {
	case scaler.ActionSpawning:
		return fmt.Sprintf("provisioning agent %s (scaler %s, %s) since %s", st.AgentID, st.Scaler, st.Backend, st.At.UTC().Format(time.RFC3339))
	case scaler.ActionAtCapacity:
		return "waiting for capacity: " + st.Reason
	case scaler.ActionSkipped:
		return st.Reason
	case scaler.ActionNoMatch:
		return "no scaler matches its labels (" + st.Reason + ")"
	}
	return st.Reason
}
