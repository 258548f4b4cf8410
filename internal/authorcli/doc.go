// Package authorcli is the `kici` command: the tool a workflow author runs
// on a checkout to validate and compile workflows and to preview what an
// event would run. It only reads files; it never talks to an orchestrator.
//
// Only cmd/kici imports it. Main builds a fresh command tree on every call,
// so concurrent calls (as in tests) share nothing.
package authorcli
