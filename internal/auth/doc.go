// Package auth holds kici's credentials and who may do what with them:
//
//   - admin tokens (kadm_…), each with one role (owner, admin, auditor)
//     over a fixed list of permissions, and the bootstrap token of
//     KICI_BOOTSTRAP_ADMIN_TOKEN, which counts as an owner;
//   - the hashing and minting of agent tokens (kat_…), which agentws
//     checks;
//   - job tokens (kjt_…), scoped to one dispatch of one job;
//   - the audit log writer, and the limiter of failed authentications per
//     client address.
//
// Tokens are stored only as SHA-256 hashes and compared in constant time.
// The api and agentws packages import auth; auth imports only the store.
// *AdminTokens, *JobTokens, *AuditLog and *FailureLimiter are safe for
// concurrent use.
package auth
