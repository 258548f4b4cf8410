// Package fcapi is a small typed client of the Firecracker REST API, which a
// Firecracker process serves as HTTP/1.1 with JSON bodies on a unix socket
// (by default /run/firecracker.socket inside its jail). It covers the calls
// kici's firecracker backend makes: describe the instance, configure the
// machine, boot source, drives, network interfaces and MMDS before boot,
// fill the MMDS data store, run actions (InstanceStart, SendCtrlAltDel,
// FlushMetrics), pause and resume the VM, and create and load snapshots.
// The types carry the API's JSON field names (src/firecracker/swagger/
// firecracker.yaml in firecracker-microvm/firecracker); fields the backend
// never sets are left out.
//
// Every method takes the request's ctx first; a cancelled ctx abandons the
// request (the VMM may still act on a request it had already read). A
// refusal of the VMM (a 4xx or 5xx answer) is an *APIError carrying the
// status and the `fault_message` of the body; transport failures are
// returned wrapped as they are. Response bodies are read up to 64 KiB and
// always closed.
//
// Only kici's firecracker backend and its tests import this package. A
// *Client keeps one http.Client per socket (re-dialling a socket per call
// leaked connections in other Firecracker integrations) and is safe for
// concurrent use, though Firecracker itself handles one request at a time.
package fcapi
