package pki

import (
	"testing"
	"time"
)

// TestJoinFlow walks a worker's first join and first connection, each
// side using only what it would have.
func TestJoinFlow(t *testing.T) {
	t.Parallel()
	// Coordinator: the cluster CA, a serving certificate, and a join
	// token of which it stores the ID and the secret's hash.
	ca := newTestCA(t, "prod")
	tok, err := NewJoinToken(ca.Hash())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{tok.ID: HashSecret(tok.Secret)}
	given := tok.Encode() // shown once to the operator

	// Worker: parse the token, check the CA it was sent, make a key and
	// a request.
	wtok, err := ParseJoinToken(given)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := wtok.VerifyCA(ca.CertPEM())
	if err != nil {
		t.Fatalf("VerifyCA: %v", err)
	}
	key, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	const nodeID = "3f2c9a8e-1b7d-4e0f-a6c5-d4b3e2f1a0b9"
	csr, err := NewCSR(key, nodeID)
	if err != nil {
		t.Fatal(err)
	}

	// Coordinator: check the secret, sign.
	hash, ok := stored[wtok.ID]
	if !ok || !SecretMatches(hash, wtok.Secret) {
		t.Fatal("the coordinator does not recognise the token")
	}
	certPEM, err := ca.SignClient(csr, nodeID, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	// Worker: keep the credential and dial with mutual TLS.
	cred, err := NewCredential(key, certPEM, caCert)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := exchange(t, serverConfigFor(t, ca), ClientTLS(caCert, cred, "localhost"))
	if err != nil || srv.err != nil {
		t.Fatalf("exchange: client %v, server %v", err, srv.err)
	}
	if id, err := NodeIDOf(srv.state.PeerCertificates[0]); err != nil || id != nodeID {
		t.Errorf("the coordinator sees node %q (%v), want %q", id, err, nodeID)
	}
}
