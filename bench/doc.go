// Command bench measures kici end to end on the machine it runs on, with
// real kici-orchestrator and kici-agent processes (built from this tree)
// talking real HTTP and WebSocket over 127.0.0.1, on SQLite and on
// PostgreSQL. docs/benchmarks.md ("End to end: latency, dispatch,
// throughput, memory" and "Auto-scaler") explains each method and holds
// the measured numbers.
//
//	go run ./bench                        # everything, one table
//	go run ./bench -o json                # the same as JSON
//	go run ./bench -runs 50 -jobs 200     # smaller counts (-h lists the flags)
//	go run ./bench -only latency,rss      # some benchmarks only
//	go run ./bench -only scaler           # the auto-scaler only (15–25 s)
//	go run ./bench -only scale            # 1, 100, 1000 connected protocol agents (about 45 s)
//	go run ./bench -profile /tmp/prof     # also CPU-profile an in-process orchestrator
//
// What it measures:
//
//   - latency: POST /trigger of a one-job workflow (`run: echo hi`) until
//     the run is seen to succeed, with one connected kici-agent; sequential
//     runs, median and p99, measured both ways, alternating: on the run's
//     SSE stream (GET /api/v1/runs/{id}/events), and by reading GET
//     /api/v1/runs/{id} every 10 ms, the method of the anchors' published
//     figures (Woodpecker 101.8 ms, KiCI 1,838 ms), printed beside them;
//     plus a breakdown of where the time goes taken from the processes'
//     JSON logs.
//   - dispatch: a job's enqueued_at (the queue row the orchestrator writes,
//     microseconds, wall clock) until a protocol-speaking agent inside this
//     process has read the job.dispatch frame off its WebSocket.
//   - throughput: N one-step jobs (a matrix workflow triggered several
//     times, -widths jobs per run) through 8 agents, first trigger to the
//     last job's success event; with real kici-agent processes and with
//     in-process protocol agents that finish each job at once (the
//     orchestrator's own ceiling). It also counts runs left "running"
//     after all their jobs succeeded (a PostgreSQL race, see the doc).
//   - rss: VmRSS of an idle orchestrator (SQLite) and of an idle, connected
//     agent, from /proc/<pid>/status.
//   - scaler (part of the default run, 15–25 s; SQLite only, whatever
//     -engines says): an orchestrator with KICI_SCALER_CONFIG_PATH and
//     one scaler, and one-job `runs-on: [<the scaler's label>]` runs that
//     no agent can take, so each spawns a one-shot agent. Scale request
//     (the orchestrator's "agent requested from scaler" log line) until
//     the agent registered ("agent registered"), both with the agent's id
//     and nanosecond times from one clock: -spawns sequential runs through
//     a bare-metal scaler (maxAgents 1, binaryPath the built kici-agent),
//     then -container-spawns through a container scaler (an image FROM
//     scratch with the static kici-agent and busybox, built with docker
//     build; imagePullPolicy Never; the orchestrator listens on the
//     docker0 address and the agents dial ws://host.docker.internal:PORT/ws
//     through extraHosts host.docker.internal:host-gateway). Without a
//     reachable Docker engine (docker info), a docker0 bridge or busybox
//     the container row says "not run" and why; that is not a failure.
//     Then one -scaler-jobs matrix run through a bare-metal scaler with
//     maxAgents -scaler-agents: wall time, jobs/s and the most agents alive
//     at once (sampled every 20 ms and, exactly, from the log). The
//     processes' logs and the jobs' scaler events split each spawn into
//     stages; the kici_orch_scaler_provisioning_seconds histogram (GET
//     /metrics) is read as a cross-check.
//   - scale (not in the default run, about 45 s; SQLite only): for each N
//     of -scale-agents, a fresh orchestrator holding N protocol agents
//     (one shared agent token): its RSS idle with all N listed, the
//     enqueue → dispatch latency of -scale-jobs sequential jobs, and its
//     RSS after them, against RSS ≤ 300 MB and p99 ≤ 10 ms.
//
// It must run from the repository root (it builds ./cmd/...). Every child
// process is stopped when it ends (the orchestrator destroys the agents it
// spawned; the scaler benchmark then removes any container left with the
// orchestrator's instance label, and its image), and with -timeout the
// whole run is bounded. The PostgreSQL variants create a schema bench_<random> in the
// database of -pg and drop it afterwards.
//
// Only this command uses the package; nothing imports it.
package main
