// Package peer is the channel between the nodes of a kici cluster: a
// worker dials each coordinator's /ws/peer, and the two speak over it.
//
// The channel is mutual TLS inside a WebSocket. The WebSocket lets it
// share the orchestrator's one listen address (and pass the reverse
// proxies operators put in front of it, which see only binary frames);
// TLS 1.3 run over the WebSocket's byte stream, with the cluster CA of
// internal/cluster/pki on both sides, authenticates both ends and
// encrypts everything end to end, whatever terminates the outer HTTPS.
// A coordinator presents a certificate for [CoordinatorServerName] from
// the cluster CA; a worker presents its node certificate, whose node id
// becomes the connection's identity ([Conn.PeerID]). A worker that has
// not joined yet has no certificate: a listener that allows joins
// ([ServerConfig.AllowJoin]) accepts it with an empty identity, and the
// only thing such a connection may do is ask to join.
//
// Over the TLS stream travel frames: a 4-byte big-endian length and a
// JSON [Frame] of at most [MaxFrame] bytes. A frame with an ID is a
// request that must be answered (a reply names it in ReplyTo, and carries
// Error for an explicit failure, never silence); [Conn.Request] waits for
// the answer with the caller's deadline, and every waiter of a connection
// fails with [ErrClosed] when it ends. A connection that receives nothing
// for [Config.IdleTimeout] is closed: peers send heartbeats, so silence
// means a dead or cut-off peer, even without a TCP reset.
//
// A *Conn is safe for concurrent use: any goroutine may Send or Request
// while Run reads. Only the cluster code of the orchestrator (coordinator
// and worker roles) imports this package.
package peer
