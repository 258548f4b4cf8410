// Package pki is the cluster's certificate authority and the credentials
// that nodes of a kici cluster prove themselves with.
//
// Coordinators share one PostgreSQL database and one cluster CA ([CA]).
// A worker has no database: it joins once with a [JoinToken], which pins
// the CA by the SHA-256 of its certificate, in the manner of k3s. The
// worker fetches the CA certificate from a coordinator over a channel it
// does not yet trust, checks it against the token ([JoinToken.VerifyCA]),
// makes its own key ([NewNodeKey]) and certificate request ([NewCSR]), and
// sends the request with the token's secret. The coordinator compares the
// secret with the hash it stored ([HashSecret], [SecretMatches]) and signs
// a short-lived client certificate ([CA.SignClient]). From then on the
// worker dials with mutual TLS ([ClientTLS], [ServerTLS]), keeps its key
// and certificate in a [Credential], and renews the certificate over that
// channel before it expires ([Credential.NeedsRenewal],
// [Credential.Replace]). The credential is kept between restarts in one
// PEM file ([MarshalCredential], [SaveCredentialFile], [LoadCredential]).
//
// The first join cannot use mutual TLS, since the worker has no
// certificate yet: the CA certificate and the signing of the first CSR
// are served where no client certificate is demanded, and the worker
// sends the token's secret only after VerifyCA succeeded and over TLS
// that trusts that CA alone (ClientTLS with a nil Credential).
//
// The package does crypto and nothing else: it opens no connection,
// touches no database and logs nothing. Only the cluster packages and the
// binaries that wire them (coordinator and worker) should import it; it
// imports only the standard library and internal/durable.
//
// A *Credential is safe for concurrent use: a TLS client may read its
// certificate while a renewal replaces it. A *CA is immutable after
// NewCA or LoadCA and so is safe for concurrent use too. JoinToken is a
// plain value; its String, GoString and LogValue leave the secret out, so
// printing or logging one by mistake leaks nothing.
package pki
