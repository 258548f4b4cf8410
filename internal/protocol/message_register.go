package protocol

import (
	"slices"
	"time"
)

// RegisterTimeout is how long the orchestrator waits for [Register] on a new
// connection before it closes it with [CloseRegisterTimeout].
const RegisterTimeout = 10 * time.Second

// Features an agent may list in [Register.Features]. A feature is an
// optional behaviour both sides must understand; an orchestrator uses it
// only with an agent that announced it, and ignores names it does not know.
const (
	// FeatureArchiveInline: the agent uses [Source.ArchiveInline] when a
	// dispatch carries it, instead of fetching Source.ArchiveURL.
	FeatureArchiveInline = "archive_inline"
)

// Register is the agent's first message on a new connection (agent →
// orchestrator). The orchestrator answers with [Registered] or closes the
// connection with one of the Close* codes; it sends nothing else first.
type Register struct {
	// AgentID names the agent; required. It is stable across reconnects of
	// one agent process. A newer connection with the same AgentID replaces
	// the older one ([CloseReplaced]). A scaler agent uses the id of the
	// spawn it was started for.
	AgentID string `json:"agent_id"`
	// Labels are the agent's labels; a job runs here only if its runs-on
	// labels are all among them. Each must be non-empty and appear once, and
	// all must be allowed by the agent token's label scope
	// ([CloseLabelsNotAllowed]).
	Labels []string `json:"labels,omitempty"`
	// Version is the agent's build version, for display.
	Version string `json:"version,omitempty"`
	// Hostname, OS and Arch describe the agent's host (OS and Arch as Go's
	// GOOS and GOARCH), for display.
	Hostname string `json:"hostname,omitempty"`
	OS       string `json:"os,omitempty"`
	Arch     string `json:"arch,omitempty"`
	// Concurrency is how many jobs the agent runs at once; at least 1.
	Concurrency int `json:"concurrency"`
	// InFlight lists, on a reconnect, every job the agent is still running
	// or still holds unacknowledged messages for. Empty on a fresh start.
	InFlight []InFlightJob `json:"in_flight,omitempty"`
	// OneShot means the agent exits after its first job ends.
	OneShot bool `json:"one_shot,omitempty"`
	// ScalerAgent means a scaler spawned this agent; AgentID must then be a
	// spawn the orchestrator knows ([CloseUnknownScalerAgent]).
	ScalerAgent bool `json:"scaler_agent,omitempty"`
	// Features lists the optional protocol behaviours the agent
	// understands (Feature* constants). Each must be non-empty and appear
	// once; unknown names are allowed (a newer agent).
	Features []string `json:"features,omitempty"`
}

// Supports reports whether the agent announced feature.
func (m *Register) Supports(feature string) bool {
	return slices.Contains(m.Features, feature)
}

// InFlightJob is one job an agent reports when it registers again.
type InFlightJob struct {
	// JobID is the job; required.
	JobID string `json:"job_id"`
	// LastSeq is the highest seq the agent has given a message of this job
	// (0 if none yet). The orchestrator uses it only for diagnostics.
	LastSeq uint64 `json:"last_seq"`
}

// Type returns [TypeRegister].
func (*Register) Type() string { return TypeRegister }

// Validate checks the required fields, labels and in-flight jobs.
func (m *Register) Validate() error {
	c := check{typ: TypeRegister}
	c.required("agent_id", m.AgentID)
	c.nonEmptyItems("labels", m.Labels)
	c.unique("labels", m.Labels)
	c.atLeast("concurrency", int64(m.Concurrency), 1)
	c.nonEmptyItems("features", m.Features)
	c.unique("features", m.Features)
	ids := make([]string, len(m.InFlight))
	for i, j := range m.InFlight {
		c.required(item("in_flight", i, "job_id"), j.JobID)
		ids[i] = j.JobID
	}
	c.unique("in_flight", ids)
	return c.err
}

// Registered accepts a [Register] (orchestrator → agent). Only after it may
// the agent replay buffered messages and may the orchestrator dispatch.
type Registered struct {
	// AgentID echoes the registered agent's id; required.
	AgentID string `json:"agent_id"`
	// HeartbeatIntervalMS is how often, in milliseconds, each side sends a
	// [Heartbeat]; at least 1. Either side treats the connection as dead
	// after two intervals without any message (see [HeartbeatTimeout]).
	HeartbeatIntervalMS int64 `json:"heartbeat_interval_ms"`
	// ServerVersion is the orchestrator's build version, for display.
	ServerVersion string `json:"server_version,omitempty"`
	// Resume answers Register.InFlight: for each job the agent may go on
	// with, the highest seq the orchestrator has applied. The agent replays
	// only that job's messages with a greater seq. A job of InFlight that is
	// missing here is no longer the agent's: the agent stops it at once, as
	// for a forced cancel, and drops its buffered messages unsent.
	Resume []ResumeJob `json:"resume,omitempty"`
}

// ResumeJob tells a reconnected agent where to resume one job's messages.
type ResumeJob struct {
	// JobID is the job; required.
	JobID string `json:"job_id"`
	// AckSeq is the highest seq of the job the orchestrator has applied;
	// 0 if none.
	AckSeq uint64 `json:"ack_seq"`
}

// Type returns [TypeRegistered].
func (*Registered) Type() string { return TypeRegistered }

// Validate checks the required fields, the interval and the resume list.
func (m *Registered) Validate() error {
	c := check{typ: TypeRegistered}
	c.required("agent_id", m.AgentID)
	c.atLeast("heartbeat_interval_ms", m.HeartbeatIntervalMS, 1)
	ids := make([]string, len(m.Resume))
	for i, j := range m.Resume {
		c.required(item("resume", i, "job_id"), j.JobID)
		ids[i] = j.JobID
	}
	c.unique("resume", ids)
	return c.err
}

// HeartbeatInterval returns HeartbeatIntervalMS as a duration.
func (m *Registered) HeartbeatInterval() time.Duration {
	return time.Duration(m.HeartbeatIntervalMS) * time.Millisecond
}
