// Package orchestrator wires kici's server together: it reads the
// configuration from the environment, opens the store, builds the
// scheduler, dispatcher, pipeline, agent endpoint and HTTP API, recovers
// the state of a previous process, and serves until its context ends.
//
// Only cmd/kici-orchestrator (and end-to-end tests) import it.
package orchestrator
