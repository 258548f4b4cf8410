// Package scalertest is the conformance harness every scaler backend runs
// (STYLE rule 23): [Run] drives a backend through the life of a spawned
// agent against a small orchestrator on 127.0.0.1 that speaks the real
// agent protocol (internal/protocol) far enough to accept a registration:
//
//   - spawn: the events come in order (provisioning first, connecting last),
//     the handle names the agent, and the agent registers with the request's
//     id, labels, one-shot and scaler flags and token;
//   - MarkRegistered, List shows the agent;
//   - Destroy interrupts the agent with a grace period (it closes its
//     connection itself, with 1001 going away), its compute is gone (for a
//     local process: the PID), List no longer shows it, no EventFailed came,
//     and a second Destroy returns nil;
//   - Destroy of an id the backend never spawned returns nil;
//   - Spawn with a cancelled ctx returns the ctx's error and leaves nothing
//     behind;
//   - an agent that exits before it registers (by default: kici-agent given
//     an http:// orchestrator URL) gives one EventFailed, after the spawn's
//     own events, whose detail holds the agent's last output line;
//   - after a restart (a second backend with the same configuration and
//     state dir), Recover re-attaches a live agent and reports a destroyed
//     one gone, and the new backend can destroy the re-attached agent;
//   - Close destroys every agent and may be called twice.
//
// A backend is done when it passes. Use it from the backend's tests:
//
//	func TestConformance(t *testing.T) {
//		scalertest.Run(t, scalertest.Harness{
//			New:      func(t *testing.T, dir string) scaler.Backend { return mybackend.New(...) },
//			LabelSet: func(t *testing.T) scaler.LabelSet { return scaler.LabelSet{...} },
//		})
//	}
//
// Only tests import this package. Run runs its scenarios as parallel
// subtests.
package scalertest
