package protocol

// Version is the protocol version this package speaks. It is the "v" of every
// message's envelope; a message of any other version is refused with
// [ErrVersion] and the connection closed with [CloseVersionMismatch].
const Version = 1

// MaxMessageBytes bounds one encoded message (one WebSocket frame). [Decode]
// refuses anything larger before parsing it and [Encode] refuses to produce
// it. Log output is batched far below this (see [MaxLogChunkTextBytes]); a
// dispatch that does not fit cannot be sent and fails the job.
const MaxMessageBytes = 1 << 20

// Message types, the "type" of the envelope. The arrow gives the direction:
// agent → orchestrator, orchestrator → agent, or both.
const (
	TypeRegister    = "register"     // agent → orchestrator
	TypeRegistered  = "registered"   // orchestrator → agent
	TypeJobDispatch = "job.dispatch" // orchestrator → agent
	TypeJobAck      = "job.ack"      // agent → orchestrator
	TypeJobReject   = "job.reject"   // agent → orchestrator
	TypeJobStatus   = "job.status"   // agent → orchestrator
	TypeStepStatus  = "step.status"  // agent → orchestrator
	TypeLogChunk    = "log.chunk"    // agent → orchestrator
	TypeHeartbeat   = "heartbeat"    // both
	TypeJobCancel   = "job.cancel"   // orchestrator → agent
	TypeJobAckSeq   = "job.ackseq"   // orchestrator → agent
	TypeError       = "error"        // orchestrator → agent
)

// Message is one protocol message. Each message type is a struct in this
// package whose pointer implements Message.
type Message interface {
	// Type returns the message's envelope type, one of the Type* constants.
	Type() string
	// Validate reports the first field that breaks the message's rules,
	// naming the message type and the field, e.g.
	// `job.status: missing "job_id"`. Decode and Encode call it.
	Validate() error
}

// JobScoped is implemented by the agent → orchestrator messages that belong
// to one dispatched job and carry its sequence number: [JobAck], [JobReject],
// [JobStatus], [StepStatus] and [LogChunk].
//
// Sequence numbers count per dispatch: the agent gives the first job-scoped
// message of a job.dispatch seq 1 and each later one the next number. The
// orchestrator applies a message only if its seq is greater than the last
// one it applied for that job, so a message replayed after a reconnect takes
// effect exactly once. docs/protocol.md states the whole rule.
type JobScoped interface {
	Message
	// JobSeq returns the job the message belongs to and its sequence number.
	// (The struct fields are named JobID and Seq, so the accessor cannot be.)
	JobSeq() (jobID string, seq uint64)
	// MoreFollows and SetMore read and set the message's Burst.
	MoreFollows() bool
	SetMore(more bool)
}

// Burst is part of every job-scoped message. An agent that writes several
// messages at once sets More on all but the last of them, so that the
// orchestrator can apply them together (in one transaction) rather than
// apply the first while the rest are still being read. It is a hint: the
// orchestrator waits for the next message only briefly (see
// docs/protocol.md), and a message without it is applied as it comes.
type Burst struct {
	// More: the agent wrote the next message right after this one.
	More bool `json:"more,omitempty"`
}

// MoreFollows reports More.
func (b *Burst) MoreFollows() bool { return b.More }

// SetMore sets More.
func (b *Burst) SetMore(more bool) { b.More = more }

// Who may send a message type.
type sender uint8

const (
	fromAgent sender = 1 << iota
	fromServer
)

// messageType is the registry entry of one message type.
type messageType struct {
	from sender
	// decode unmarshals the envelope's JSON object into a new message.
	decode func(data []byte) (Message, error)
}

// registry holds every message type Decode accepts.
var registry = map[string]messageType{
	TypeRegister:    {fromAgent, decodeAs[Register]},
	TypeRegistered:  {fromServer, decodeAs[Registered]},
	TypeJobDispatch: {fromServer, decodeAs[JobDispatch]},
	TypeJobAck:      {fromAgent, decodeAs[JobAck]},
	TypeJobReject:   {fromAgent, decodeAs[JobReject]},
	TypeJobStatus:   {fromAgent, decodeAs[JobStatus]},
	TypeStepStatus:  {fromAgent, decodeAs[StepStatus]},
	TypeLogChunk:    {fromAgent, decodeAs[LogChunk]},
	TypeHeartbeat:   {fromAgent | fromServer, decodeAs[Heartbeat]},
	TypeJobCancel:   {fromServer, decodeAs[JobCancel]},
	TypeJobAckSeq:   {fromServer, decodeAs[JobAckSeq]},
	TypeError:       {fromServer, decodeAs[Error]},
}

// SentByAgent reports whether an agent may send messages of type typ. The
// orchestrator closes a connection that sends it anything else with
// [CloseUnexpectedMessage].
func SentByAgent(typ string) bool {
	return registry[typ].from&fromAgent != 0
}

// SentByServer reports whether the orchestrator may send messages of type
// typ. The agent closes a connection that sends it anything else with
// [CloseUnexpectedMessage].
func SentByServer(typ string) bool {
	return registry[typ].from&fromServer != 0
}
