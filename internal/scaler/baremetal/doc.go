// Package baremetal is the auto-scaler's bare-metal backend: it runs each
// spawned kici-agent as a process on the orchestrator's own host.
//
// # Spawn
//
// Spawn starts LabelSet.BinaryPath with no arguments, as the leader of a new
// session (and so of a new process group), in a fresh work dir:
//
//	<WorkDir>/agents/<agent id>/   the agent's KICI_AGENT_WORKDIR; removed by Destroy
//	<WorkDir>/logs/<agent id>.log  its stdout and stderr; kept after Destroy
//	                               (the newest Config.KeepLogs are kept)
//
// The agent's environment is built from scratch: PATH, HOME, LANG, TMPDIR
// and USER from the orchestrator's environment, then the SpawnRequest's Env
// (the KICI_* identity of the agent), then KICI_AGENT_WORKDIR, then the
// label set's Env, which wins. Stdin is /dev/null. The agent writes its
// output straight into its log file rather than into a pipe the
// orchestrator reads: a pipe would break when the orchestrator restarts,
// and the agent would die of SIGPIPE on its next log line, which would
// defeat Recover. When the agent exits before it registered, the last 50
// lines of that file go into the EventFailed detail.
//
// A binary that does not exist, is not a regular file or is not executable,
// or that the kernel refuses to start, is a [scaler.DeterministicSpawnError]
// (after an EventFailed). Label-set limits are not enforced: the agent runs
// with the orchestrator's user and no cgroup of its own.
//
// # Destroy
//
// Destroy sends SIGTERM to the agent's process group, waits up to
// Config.KillGrace, then sends SIGKILL to the group and to every process
// left in the agent's session. The session matters because the agent runs
// each job step in a process group of its own: a group kill alone would
// leave a step's processes behind. The watcher goroutine waits for the
// agent with waitid(WNOWAIT) and only reaps it after the last signal could
// be sent, so its PID (and process group and session id) cannot be reused
// by an unrelated process while a signal is still possible.
//
// # Recover
//
// A Handle's Blob is a versioned JSON record of the process: PID, start time
// (field 22 of /proc/<pid>/stat, in clock ticks after boot), boot id, work
// dir and log file. After a restart, Recover re-attaches a record whose PID
// still runs with the same start time on the same boot; such a process is
// no longer the orchestrator's child, so its liveness is polled every
// Config.PollInterval, and it is signalled only after its start time was
// checked again. A record that does not match is reported gone; its PID is
// never signalled, and its work dir is removed. Recover needs /proc: on
// other systems every record is reported gone.
//
// Spawn needs a Unix host; elsewhere it refuses.
//
// # Use
//
// The orchestrator builds one Backend per bare-metal scaler and hands it to
// the scaler.Manager; tests use it through internal/scaler/scalertest. A
// *Backend is safe for concurrent use.
package baremetal
