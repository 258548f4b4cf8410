// Package scaler is kici's auto-scaler: when no connected agent can take a
// queued job, the Manager finds the scaler whose label set covers the job's
// runs-on, reserves capacity, and asks that scaler's Backend to spawn a
// one-shot kici-agent bound to the job (a host process, a container, a
// microVM). Every step of the spawn is reported as an Event on the job's
// timeline and log, and a failure lands in the job's queue row, so a job
// that never gets an agent fails with the real cause.
//
// This package holds the contract every backend implements (Backend and
// its types, capabilities and sentinel errors) and the Manager. Each
// backend is a subpackage (scaler/baremetal, scaler/container, scaler/fake)
// that imports this contract and never another backend. The configuration
// file is read by scaler/config.
//
// Manager.Orphans lists every live compute of the scalers with what tracks
// it (the manager's spawns, and the orchestrator's view through
// Config.Trackers); Manager.StopOrphans stops named untracked compute, one
// id at a time, through the backends that are an OrphanStopper.
//
// A *Manager is safe for concurrent use; so must every Backend be.
package scaler
