package worker

// The agents connected to a worker reach the coordinators through it: the
// worker relays each agent's WebSocket messages over its channel to one
// coordinator, where the agent is served like one connected there (its
// token checked, its jobs dispatched, its messages applied once by their
// sequence numbers). When that channel ends, the worker closes the
// agent's WebSocket with CloseShuttingDown; the agent reconnects to the
// worker, which relays it to another coordinator, and the agent's report
// of its jobs in flight moves them there.

// Relay frame types.
const (
	// TypeAgentOpen asks the coordinator to serve a new agent
	// (AgentOpen); it is answered once the agent's token is checked, with
	// an error for a token the coordinator refuses.
	TypeAgentOpen = "agent.open"
	// TypeAgentData carries one WebSocket message of an agent, either
	// way (AgentData).
	TypeAgentData = "agent.data"
	// TypeAgentClose ends an agent's relayed stream, either way
	// (AgentClose).
	TypeAgentClose = "agent.close"
)

// AgentOpen opens an agent's relayed stream Conn.
type AgentOpen struct {
	Conn string `json:"conn"`
	// Authorization is the header the agent sent the worker.
	Authorization string `json:"authorization"`
	// Client is the agent's address as the worker saw it.
	Client string `json:"client"`
}

// AgentData is one message of the stream Conn.
type AgentData struct {
	Conn string `json:"conn"`
	Data []byte `json:"data"`
}

// AgentClose ends the stream Conn with a WebSocket close code.
type AgentClose struct {
	Conn   string `json:"conn"`
	Code   int    `json:"code"`
	Reason string `json:"reason,omitempty"`
}

// relayBuffer is how many messages of one stream may wait for their
// reader; past it the stream is closed (the agent reconnects and replays)
// rather than stalling every other stream of the channel.
const relayBuffer = 256

// RelayBuffer is relayBuffer, for the coordinator's side.
const RelayBuffer = relayBuffer
