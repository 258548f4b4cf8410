package protocol

import "time"

// Heartbeat timing. The orchestrator announces the interval in
// Registered.HeartbeatIntervalMS; these are its defaults.
const (
	// DefaultHeartbeatInterval is how often each side sends a [Heartbeat].
	DefaultHeartbeatInterval = 30 * time.Second
	// HeartbeatTimeout is how long a side waits without receiving any
	// message before it treats the connection as dead and closes it with
	// [CloseHeartbeatTimeout]: two default intervals.
	HeartbeatTimeout = 2 * DefaultHeartbeatInterval
)

// Heartbeat keeps a connection alive (both directions). Each side sends one
// every heartbeat interval after [Registered]; any message received counts as
// a sign of life.
type Heartbeat struct {
	// Time is when the sender sent it; required.
	Time time.Time `json:"time"`
	// Busy lists, from the agent, the jobs it is running, for diagnostics
	// (a job's liveness is its agent's connection). Empty from the
	// orchestrator.
	Busy []string `json:"busy,omitempty"`
}

// Type returns [TypeHeartbeat].
func (*Heartbeat) Type() string { return TypeHeartbeat }

// Validate checks the time and the busy list.
func (m *Heartbeat) Validate() error {
	c := check{typ: TypeHeartbeat}
	if m.Time.IsZero() {
		c.failf("missing %q", "time")
	}
	c.nonEmptyItems("busy", m.Busy)
	c.unique("busy", m.Busy)
	return c.err
}

// Codes of an [Error] message. A receiver treats an unknown code like
// ErrorInternal.
const (
	// ErrorInvalidMessage: the agent's message could not be decoded; sent
	// before closing with CloseMalformed or CloseVersionMismatch.
	ErrorInvalidMessage = "invalid_message"
	// ErrorUnexpectedMessage: the message is valid but not allowed now (for
	// example before register); sent before closing with
	// CloseUnexpectedMessage.
	ErrorUnexpectedMessage = "unexpected_message"
	// ErrorNotOwner: a job-scoped message named a job not dispatched to
	// this agent; the message was dropped and the connection stays open.
	ErrorNotOwner = "not_owner"
	// ErrorInternal: the orchestrator failed to handle a message.
	ErrorInternal = "internal"
)

// Error tells the agent that the orchestrator refused or failed a message
// (orchestrator → agent). It usually precedes a close, whose code decides
// what the agent does next; the agent only logs the Error itself.
type Error struct {
	// Code is one of the Error* codes; required.
	Code string `json:"code"`
	// Message explains the problem to a human, e.g. the decode error.
	Message string `json:"message,omitempty"`
}

// Type returns [TypeError].
func (*Error) Type() string { return TypeError }

// Validate checks the code.
func (m *Error) Validate() error {
	c := check{typ: TypeError}
	c.required("code", m.Code)
	return c.err
}
