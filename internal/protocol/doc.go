// Package protocol defines the messages that kici's orchestrator and its
// agents exchange over the agent WebSocket (/ws): one struct per message
// type, the JSON envelope they travel in, the protocol version, the decoding
// limits, and the WebSocket close codes either side may use.
//
// The package contains no behaviour. It does no I/O, keeps no state and starts
// no goroutines: it turns bytes into validated messages and back ([Decode],
// [Encode]) and names the rules both sides follow. The rules themselves
// (handshake, per-job sequence numbers and exactly-once application,
// heartbeats, what to do on each close code) are written down in
// docs/protocol.md; the orchestrator's agentws and dispatch packages and the
// agent runtime (internal/agent) implement them. Those are the packages that
// import protocol; it imports only the standard library and
// internal/workflow (a dispatch carries a compiled [workflow.Job]).
//
// # Envelope
//
// Every message is one JSON object in one WebSocket text frame:
//
//	{"v":1,"type":"job.status","job_id":"...","seq":7,"status":"running"}
//
// "v" is [Version] and "type" selects the message struct; the remaining keys
// are that struct's fields. A receiver ignores keys it does not know, so a
// newer peer may add optional fields without bumping [Version]. A new message
// type, a new required field or a changed meaning needs a new [Version],
// because an older receiver refuses unknown types and other versions.
//
// # Types
//
// Every message type is plain data: a struct of exported fields with pointer
// receivers for its [Message] methods, so a type switch on a decoded
// [Message] uses the pointer types (*JobStatus, not JobStatus). Values are
// safe for concurrent reads; nothing in this package mutates a message after
// [Decode] returns it. A [JobDispatch] carries secret values: print or log it
// only through its String and LogValue methods, which leave them out.
package protocol
