// Package authorcli is the `kici` command: the tool a workflow author runs
// on a checkout to validate and compile workflows, to preview what an
// event would run, and to run a workflow's jobs on the local machine
// (`kici run`, through internal/agent/runner). It never talks to an
// orchestrator.
//
// Only cmd/kici imports it. Main builds a fresh command tree on every call,
// so concurrent calls (as in tests) share nothing, except that a `kici run`
// in progress takes SIGINT and SIGTERM, which reach every such run of the
// process.
package authorcli
