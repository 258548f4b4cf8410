// Package fake is a fake scaler backend, for tests of the scaler manager and
// the dispatcher. It spawns no compute: each spawn runs a real kici agent
// (internal/agent) inside the test's process, configured from the spawn's
// environment exactly as the kici-agent binary would be (agent.FromEnv), so
// it registers with the orchestrator under test and the jobs dispatched to
// it really run.
//
// Tests steer a spawn through its label set's Env:
//
//	FAKE_SPAWN_FAIL=refused        EventFailed, then a DeterministicSpawnError
//	FAKE_SPAWN_FAIL=error          a plain error (the manager reports it)
//	FAKE_SPAWN_DELAY=200ms         Spawn takes that long (a cancelled ctx ends it)
//	FAKE_EXIT_BEFORE_REGISTER=1    the agent exits at once; EventFailed follows
//	                               with ExitOutput as its last output line
//
// A bad kici environment fails like the binary: given an http:// orchestrator
// URL, the agent "exits" with code 2 and kici-agent's own message.
//
// Agents run on a Host, which stands for the machine: they outlive the
// Backend that spawned them, so a second Backend on the same Host can
// Recover them, as after an orchestrator restart. List sees every agent of
// the Backend's scaler (Config.Scaler) on its Host, tracked or not, and
// Host.Leave plants a Leftover: compute no Backend tracks, as a crashed
// orchestrator leaves it, for orphan listing and StopOrphan (which stops
// one named untracked agent and nothing else). Destroy cancels the
// agent's context (the agent drains and closes its connection, as on
// SIGTERM) and waits for it to stop.
//
// Only tests import this package. A *Backend and a *Host are safe for
// concurrent use.
package fake
