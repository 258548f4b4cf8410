// Package agent is the kici agent runtime, the heart of the kici-agent
// binary. An [Agent] dials the orchestrator's /ws endpoint, registers with
// its labels, takes the jobs the orchestrator dispatches, runs them with the
// job runner (internal/agent/runner) and reports what they do, all in the
// wire protocol of internal/protocol (docs/protocol.md). docs/agent.md is
// the operator's view: environment variables, labels, a job's environment,
// cancel, timeouts, buffering and one-shot mode.
//
// # Use
//
//	cfg, warnings, err := agent.FromEnv(os.Getenv, os.Environ())
//	a, err := agent.New(logger, cfg)
//	err = a.Run(ctx) // until ctx ends, or after one job with cfg.OneShot
//
// Only cmd/kici-agent and tests build an Agent. The orchestrator's tests may
// run a real Agent against their server the same way. `kici run` does not
// need this package: it uses internal/agent/runner directly.
//
// # The process
//
// On Linux, kici-agent's main calls [HideToken] first, which re-executes
// the binary without KICI_AGENT_TOKEN in its environment (steps of the same
// user can read /proc/<pid>/environ), and then starts the reaper
// (internal/agent/reaper, Config.Reaper) that kills the steps' processes
// once the agent process is gone, however it ends.
//
// # Delivery
//
// Every job-scoped message (job.ack, job.reject, job.status, step.status,
// log.chunk) gets the job's next sequence number and goes into the outbox,
// a replay buffer that survives disconnects. The orchestrator acknowledges
// what it applied (job.ackseq, or registered.resume after a reconnect);
// everything after that is sent again, in order, on the next connection.
// Jobs keep running while the agent is disconnected. The buffer's log text
// is bounded (Config.MaxBufferBytes); past it the oldest log chunks are
// dropped and the job's log says so.
//
// # Concurrency
//
// An Agent's Run may be called once. Its goroutines: the connection loop
// (one session at a time, each with a reader and a writer goroutine), one
// goroutine per running job (plus the runner's own per step), and the log
// batch timers. The state they share (running jobs, draining flag) sits
// behind Agent.mu; the outbox and each job's reporter have their own
// mutexes, always taken after Agent.mu and never the other way round.
// ID and Labels are safe to call at any time.
package agent
