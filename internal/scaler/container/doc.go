// Package container is the scaler backend that runs each agent in its own
// container on a Docker or Podman engine, through the engine's HTTP API
// (the Docker Engine API, which Podman also serves).
//
// New finds the engine (a configured host or socket, else the first
// readable and writable socket of /var/run/docker.sock,
// /run/podman/podman.sock and $XDG_RUNTIME_DIR/podman/podman.sock) and
// pings it. Spawn makes sure the label set's image is there (following its
// pull policy), creates a container labelled with the agent, its scaler
// and this orchestrator instance, starts it and follows its output; the
// handle's blob records the container id, so that after a restart Recover
// re-attaches to a container that still runs and removes one that does
// not. ReapLeftovers, List and StopOrphan only ever see containers
// labelled with this backend's scaler and orchestrator instance, so two
// orchestrators can share one engine. ReapLeftovers (start-up) removes
// every untracked one; StopOrphan (an operator's stop) removes the one
// container of the agent it names, and only while it runs untracked.
//
// An agent goes through these states:
//
//	         Spawn
//	           │
//	           ▼
//	       spawning ──(error, ctx cancelled, Destroy)──► gone (container removed;
//	           │                                              EventFailed sent if it
//	           │                                              had been created)
//	           │ started, output followed, Spawn returns
//	           ▼
//	        running ──(exited before MarkRegistered)──► exited (EventFailed sent once
//	           │                                                 Spawn returned;
//	           │                                                 Destroy removes it)
//	           │ MarkRegistered
//	           ▼
//	       registered ──(exited)──► exited (no event: a disconnect)
//
//	Destroy, from any state: untracked at once, then the container is
//	stopped (with the grace period) and force-removed; a spawn still in
//	progress notices and removes what it created.
//
// Network isolation (the reference's nftables rules and kici-agent-net)
// is not implemented: containers join the engine's default network.
//
// Only the orchestrator's wiring and its tests import this package. A
// *Backend is safe for concurrent use.
package container
