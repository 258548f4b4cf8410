// Package secrets keeps the values jobs receive as environment variables:
// sealed at rest with AES-256-GCM under KICI_SECRET_KEY (or, with SQLite
// only, a key generated into the data dir), each with a fresh random
// nonce and its scope and name bound as additional authenticated data, so
// that a sealed value copied to another secret's row does not open. A key
// check (a known value sealed under the key) lets the orchestrator refuse
// to start with the wrong key, and key rotation re-seals every secret in
// one transaction.
//
// Values leave this package only through Resolve, for the dispatch of a
// job that declares them; listings carry names and metadata only, and
// nothing here logs a value (a Key prints as its fingerprint). Masks gives
// the agent further forms of the values to mask in job output.
//
// The orchestrator builds one *Service, which is safe for concurrent use;
// the api package and the dispatch builder use it.
package secrets
