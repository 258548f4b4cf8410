// Package dispatch is the live side of the queue: the registry of
// connected agents, matching queued jobs to free agents whose labels cover
// the job's runs-on, the ack deadline of each dispatch, the sweeps that
// requeue or fail jobs (ack timeout, queue timeout, agent lost after the
// recovery window), cancellation, and applying what agents report
// (acks, job and step statuses, log chunks) exactly once.
//
// The queue's guarantee is at-least-once delivery with exactly-once
// effect: a job row is claimed atomically by one agent; a claim not acked
// within the ack deadline goes back to the queue (up to MaxAttempts); and
// every job-scoped agent message carries a per-dispatch sequence number
// that is applied in the same transaction as its effect, so a replay after
// a reconnect or a crash changes nothing.
//
// A job's attempt that fails is classified by its cause (agent-lost,
// infrastructure, timeout, failure; see retry.go) and, when the job's
// retry: names the cause, goes back to the queue as its next attempt in
// the transaction that would have failed it (scheduler.RetryTx). Each
// dispatch, of any attempt, gets the next dispatch attempt number, so its
// sequence numbers and log chunks never collide with an earlier one's.
//
// The agentws package owns the WebSocket connections and calls into a
// *Dispatcher, which is safe for concurrent use. Nothing here persists
// except through the store.
package dispatch
