// Package reaper makes sure that every process a kici agent's steps started
// is gone soon after the agent process dies, however it dies (SIGKILL
// included), without waiting for the agent to be restarted.
//
// # Design
//
// At start, kici-agent starts a copy of its own binary in reaper mode
// ([Start]; the copy's main calls [Main] first). The reaper holds the read
// end of a pipe whose only write end the agent holds. The agent writes one
// short line to the pipe when a step's process group starts and one when it
// ends ([Guard.Started], [Guard.Ended]). When the agent dies, the kernel
// closes its end; the reaper reads end-of-file at once and kills, with
// SIGKILL, every process that
//
//   - carries the agent's scope in its environment (KICI_AGENT_SCOPE, a
//     random value per agent process that the runner adds to every process
//     it starts, which its children inherit: this reaches a double-forked,
//     nohup'd or setsid'd child), or
//   - is in a process group the agent recorded as running, in the agent's
//     session, and started no earlier than that group's leader (this reaches
//     a child that cleared its environment but stayed in the step's group).
//
// It repeats the scan until one finds nothing new (a process may fork while
// it is being killed), then exits. The reaper ignores SIGINT, SIGTERM and
// SIGHUP and runs in its own process group, so a Ctrl-C or a group signal to
// the agent does not end it first; it ends when the agent does. A clean stop
// of the agent closes the pipe too ([Guard.Close]), so processes that steps
// left running in the background are killed then as well.
//
// Should the reaper die with the agent (an OOM kill of both, a kill of the
// whole cgroup), [Guard.Adopt] covers the rest on the next start: the agent
// keeps its scope in <workdir>/scope (fsync'd) and its next incarnation, once
// it holds the work dir's lock, kills what carries the previous scope before
// it takes a job.
//
// The runner also gives each step's direct child a parent-death signal
// (SIGKILL; see internal/agent/runner), so the step's shell dies with the
// agent even where no reaper runs.
//
// # Limits
//
// A process that both clears its environment and leaves the step's process
// group (setsid, or env -i plus setpgid) is not found. The reaper finds
// processes through /proc (Linux only); on other systems [Start] starts
// nothing and the Guard only adds the scope variable. kici does not use
// cgroups yet: a per-job cgroup would close the gap above.
//
// # Concurrency
//
// A [Guard]'s methods are safe for concurrent use.
package reaper
