package protocol

import "errors"

// WebSocket close codes of the agent protocol, in the application range
// 4000–4999. The comment of each says who closes with it and what the agent
// does next: reconnect (with the backoff of docs/protocol.md) or stop, which
// means the agent process exits with an error because reconnecting cannot
// help until an operator acts. [CloseReconnects] encodes that choice.
// Whatever the code, the orchestrator runs its disconnect triage for the
// agent's jobs when a connection ends.
const (
	// CloseUnauthorized: the orchestrator found the agent token unknown or
	// expired. Agent: stop.
	CloseUnauthorized = 4001
	// CloseRegisterTimeout: the orchestrator received no [Register] within
	// [RegisterTimeout]. Agent: reconnect.
	CloseRegisterTimeout = 4002
	// CloseLabelsNotAllowed: the orchestrator refused Register.Labels, which
	// the agent token's label scope does not allow. Agent: stop.
	CloseLabelsNotAllowed = 4003
	// CloseHeartbeatTimeout: either side received nothing for
	// [HeartbeatTimeout]. Agent: reconnect.
	CloseHeartbeatTimeout = 4004
	// CloseVersionMismatch: either side received a message of another
	// [Version]. Agent: stop (it must be upgraded or downgraded).
	CloseVersionMismatch = 4008
	// CloseReplaced: the orchestrator closes an older connection when a newer
	// one registers the same agent id. Agent: stop; another process now
	// holds the id, and reconnecting would push it out in turn.
	CloseReplaced = 4009
	// CloseTokenRevoked: the orchestrator closes every connection of an agent
	// token an operator revoked. Agent: stop.
	CloseTokenRevoked = 4010
	// CloseMalformed: either side received a message [Decode] refused for
	// any reason but the version. Agent: reconnect.
	CloseMalformed = 4011
	// CloseUnexpectedMessage: either side received a valid message it may
	// not receive now: one the peer may not send (see [SentByAgent],
	// [SentByServer]), anything but [Register] first, a second Register, or
	// anything but [Registered] first. Agent: reconnect.
	CloseUnexpectedMessage = 4012
	// CloseIdentityTaken: the orchestrator refused a Register whose agent id
	// belongs to another credential (agent token) while that agent is
	// connected or holds a job. Nothing of the refused connection is
	// applied. Agent: stop; an operator must give it its own id or token.
	CloseIdentityTaken = 4013
	// CloseAckTimeout: the orchestrator got no [JobAck] or [JobReject] for a
	// [JobDispatch] within the ack deadline. Agent: reconnect.
	CloseAckTimeout = 4031
	// CloseUnknownScalerAgent: the orchestrator knows no spawn with the id of
	// a Register with ScalerAgent set (it was destroyed or never existed).
	// Agent: stop.
	CloseUnknownScalerAgent = 4040
	// CloseShuttingDown: the orchestrator is stopping. Agent: reconnect.
	CloseShuttingDown = 4100
)

type closeCode struct {
	reason    string
	reconnect bool
}

var closeCodes = map[int]closeCode{
	CloseUnauthorized:       {"unauthorized", false},
	CloseRegisterTimeout:    {"register timeout", true},
	CloseLabelsNotAllowed:   {"labels not allowed by token", false},
	CloseHeartbeatTimeout:   {"heartbeat timeout", true},
	CloseVersionMismatch:    {"protocol version mismatch", false},
	CloseReplaced:           {"replaced by a newer connection of the same agent id", false},
	CloseTokenRevoked:       {"token revoked", false},
	CloseMalformed:          {"malformed message", true},
	CloseUnexpectedMessage:  {"unexpected message", true},
	CloseIdentityTaken:      {"agent id belongs to another agent token", false},
	CloseAckTimeout:         {"dispatch ack timeout", true},
	CloseUnknownScalerAgent: {"unknown scaler agent", false},
	CloseShuttingDown:       {"server shutting down", true},
}

// CloseReason returns the short reason sent with a close code (well within
// the 123 bytes a close frame allows), or "" for a code this package does
// not define.
func CloseReason(code int) string {
	return closeCodes[code].reason
}

// CloseReconnects reports whether an agent whose connection was closed with
// code reconnects (with backoff) or stops. It is true for every code this
// package does not define, including the standard ones (1000 normal, 1001
// going away, 1006 abnormal closure, 1011 internal error).
func CloseReconnects(code int) bool {
	c, ok := closeCodes[code]
	return !ok || c.reconnect
}

// DecodeCloseCode returns the code a receiver closes the connection with
// after [Decode] failed with err: [CloseVersionMismatch] for [ErrVersion],
// [CloseMalformed] for anything else.
func DecodeCloseCode(err error) int {
	if errors.Is(err, ErrVersion) {
		return CloseVersionMismatch
	}
	return CloseMalformed
}
