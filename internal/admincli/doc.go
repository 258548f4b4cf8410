// Package admincli is the kici-admin command: the operator's client of the
// orchestrator's HTTP API (/api/v1). It registers sources, triggers runs and
// follows them live, reads logs, cancels and reruns runs, shows the queue
// and the connected agents, and drains agents.
//
// Only cmd/kici-admin imports it. Main builds a fresh command tree on every
// call and keeps no package state, so concurrent calls (as in tests) share
// nothing. The JSON it sends and reads is that of package apiv1.
//
// Output conventions, kept by every command:
//   - listings print an aligned table by default and the API's JSON with
//     -o json; an empty listing prints one line saying so;
//   - times in tables are relative to now ("5m ago") and durations are
//     rounded ("1m5s"); -o json keeps the RFC 3339 timestamps;
//   - errors are one line on stderr, "kici-admin: <what was done>: <why>",
//     sometimes followed by indented detail lines;
//   - exit status 0 is success, 1 a failed operation (including a run that
//     did not succeed under trigger --wait or runs watch), 2 a bad command
//     line.
//
// The files are one cobra command each, named noun_verb.go, plus root.go
// (Main, the global flags, exit statuses), client.go (HTTP), sse.go (the
// event-stream reader), follow.go (live progress of runs) and output.go
// (tables, JSON and times).
package admincli
