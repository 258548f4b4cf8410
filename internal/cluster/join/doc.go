// Package join admits a worker into a kici cluster: the coordinator side
// keeps the cluster CA and issues single-use join tokens ([Service]), and
// the worker side makes the first join with one ([JoinCluster]).
//
// The first join, step by step:
//
//	operator   kici-admin peers join-token create   → Service.CreateToken
//	           (the CA is created on first use, its key sealed under the
//	           secret key; the token pins the CA's hash)
//	worker     GET  /api/v1/cluster/ca               → Service.CACertPEM
//	worker     JoinToken.VerifyCA: a CA other than the one the token pins
//	           stops the join here, before the secret is sent
//	worker     POST /api/v1/cluster/join             → Service.Join
//	           (token id, secret, node id, certificate request)
//	coordinator  checks the secret against the stored hash in constant
//	           time, spends the token (single use) and signs a client
//	           certificate for the node id
//	worker     builds its pki.Credential from its key, the certificate and
//	           the CA it verified
//
// A token is in one of four states; only an active one admits a worker:
//
//	          CreateToken
//	              │
//	              ▼
//	          ┌────────┐  Join (secret matches)   ┌──────┐
//	          │ active │ ───────────────────────► │ used │
//	          └────────┘                          └──────┘
//	           │      │
//	RevokeToken│      │ its expiry passes
//	           ▼      ▼
//	    ┌─────────┐ ┌─────────┐
//	    │ revoked │ │ expired │
//	    └─────────┘ └─────────┘
//
// A refused join never says whether a token id exists: an unknown id and
// a wrong secret give the same error (ErrTokenInvalid). Only a caller
// that holds the secret learns that the token is used, expired or
// revoked. Nothing here logs or returns a secret.
//
// Renewing a certificate over the mutual-TLS channel, and the worker's
// keeping of its credential between restarts, are not part of this
// package.
//
// The api package serves the routes, the orchestrator builds the Service
// for a coordinator, and a worker calls JoinCluster. A *Service is safe
// for concurrent use; JoinCluster may be called from many goroutines.
package join
