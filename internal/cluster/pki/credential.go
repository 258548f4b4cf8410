package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Credential is a worker's identity in the cluster: its private key, its
// current client certificate and the cluster CA that issued it. The key
// and the node id never change; the certificate is swapped by Replace
// when it is renewed. A Credential is safe for concurrent use, so a TLS
// client (ClientTLS) may read it while a renewal replaces it. Make one
// with NewCredential or LoadCredential; the zero value is not usable.
type Credential struct {
	key    crypto.Signer
	ca     *x509.Certificate
	nodeID string

	mu   sync.RWMutex
	cert tls.Certificate // Leaf set
}

// NewCredential builds a credential from a node key, the certificate a
// coordinator issued for it (PEM) and the cluster CA. It applies the same
// checks as Replace, and the node id is the one the certificate names.
func NewCredential(key crypto.Signer, certPEM []byte, ca *x509.Certificate) (*Credential, error) {
	if err := checkIsCA(ca); err != nil {
		return nil, fmt.Errorf("new credential: %w", err)
	}
	c := &Credential{key: key, ca: ca}
	cert, err := c.check(certPEM)
	if err != nil {
		return nil, fmt.Errorf("new credential: %w", err)
	}
	c.nodeID, err = NodeIDOf(cert.Leaf)
	if err != nil {
		return nil, fmt.Errorf("new credential: %w", err)
	}
	c.cert = cert
	return c, nil
}

// NodeID returns the node the credential belongs to.
func (c *Credential) NodeID() string { return c.nodeID }

// CA returns the cluster CA certificate the credential trusts. The caller
// must not modify it.
func (c *Credential) CA() *x509.Certificate { return c.ca }

// Current returns the current certificate with its key, ready for TLS.
func (c *Credential) Current() tls.Certificate {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert
}

// Replace swaps in a renewed certificate (PEM). It refuses one that is
// not for this credential's key, not signed by the cluster CA, not a
// client certificate, or not for the same node id; the current
// certificate then stays.
func (c *Credential) Replace(certPEM []byte) error {
	cert, err := c.check(certPEM)
	if err != nil {
		return fmt.Errorf("replace certificate of node %q: %w", c.nodeID, err)
	}
	id, err := NodeIDOf(cert.Leaf)
	if err != nil {
		return fmt.Errorf("replace certificate of node %q: %w", c.nodeID, err)
	}
	if id != c.nodeID {
		return fmt.Errorf("replace certificate of node %q: the new certificate is for node %q", c.nodeID, id)
	}
	c.mu.Lock()
	c.cert = cert
	c.mu.Unlock()
	return nil
}

// NewCSR makes a certificate request for this credential's key and node,
// to renew the certificate.
func (c *Credential) NewCSR() ([]byte, error) { return NewCSR(c.key, c.nodeID) }

// ExpiresAt returns when the current certificate expires.
func (c *Credential) ExpiresAt() time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert.Leaf.NotAfter
}

// RenewAt returns when the current certificate is two thirds through its
// lifetime, the time from which NeedsRenewal reports true.
func (c *Credential) RenewAt() time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	leaf := c.cert.Leaf
	return leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
}

// NeedsRenewal reports whether, at now, the current certificate is past
// two thirds of its lifetime and should be renewed. The last third leaves
// room for retries when no coordinator answers.
func (c *Credential) NeedsRenewal(now time.Time) bool {
	return !now.Before(c.RenewAt())
}

// check parses certPEM and checks it against the key and the CA.
func (c *Credential) check(certPEM []byte) (tls.Certificate, error) {
	leaf, err := parseCertPEM(certPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	if !publicKeysEqual(c.key.Public(), leaf.PublicKey) {
		return tls.Certificate{}, errors.New("the certificate is not for this node's key")
	}
	if err := leaf.CheckSignatureFrom(c.ca); err != nil {
		return tls.Certificate{}, fmt.Errorf("the certificate is not signed by the cluster CA: %w", err)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return tls.Certificate{}, errors.New("the certificate is not for client authentication")
	}
	return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: c.key, Leaf: leaf}, nil
}
