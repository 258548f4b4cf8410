package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// CAValidity is how long a new cluster CA is valid.
const CAValidity = 10 * 365 * 24 * time.Hour

// clockSkew is how far back a new certificate's NotBefore is set, so that
// a peer whose clock runs a little behind accepts it at once.
const clockSkew = time.Minute

// maxClusterNameLen bounds the cluster name put in the CA's subject.
const maxClusterNameLen = 63

// CA is a cluster's certificate authority: a self-signed ECDSA P-256
// certificate and its key. It signs the client certificates of workers
// and the serving certificates of coordinators. A CA does not change
// after NewCA or LoadCA and is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
}

// NewCA creates the CA of the cluster named clusterName, valid from now
// (less a minute for clock skew) for CAValidity. It may sign end-entity
// certificates only (path length zero).
func NewCA(clusterName string, now time.Time) (*CA, error) {
	if clusterName == "" || len(clusterName) > maxClusterNameLen {
		return nil, fmt.Errorf("create cluster CA: cluster name must be 1 to %d bytes, got %d", maxClusterNameLen, len(clusterName))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create cluster CA: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, fmt.Errorf("create cluster CA: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"kici"}, CommonName: "kici cluster CA " + clusterName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create cluster CA %q: %w", clusterName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("create cluster CA %q: parse certificate: %w", clusterName, err)
	}
	return &CA{cert: cert, certPEM: encodePEM(pemCertificate, der), key: key}, nil
}

// LoadCA reads a CA back from its certificate (one PEM block) and its
// PKCS #8 PEM key, as written by CertPEM and MarshalKey. It refuses a
// certificate that is not a CA allowed to sign certificates and a key
// that does not belong to the certificate.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("load cluster CA certificate: %w", err)
	}
	if err := checkIsCA(cert); err != nil {
		return nil, fmt.Errorf("load cluster CA certificate: %w", err)
	}
	block, err := decodeOnePEM(keyPEM, pemPrivateKey)
	if err != nil {
		return nil, fmt.Errorf("load cluster CA key: %w", err)
	}
	key, err := parseKeyDER(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("load cluster CA key: %w", err)
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return nil, errors.New("load cluster CA: the key does not match the certificate")
	}
	return &CA{cert: cert, certPEM: encodePEM(pemCertificate, cert.Raw), key: key}, nil
}

// Certificate returns the CA's certificate. The caller must not modify it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA's certificate as one PEM block: what a
// coordinator hands to a joining worker, and what is stored in the clear.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// MarshalKey returns the CA's private key as a PKCS #8 PEM block. The key
// signs every certificate of the cluster: the caller seals it (with the
// cluster's secret key) before storing it anywhere.
func (ca *CA) MarshalKey() ([]byte, error) {
	b, err := marshalKeyPEM(ca.key)
	if err != nil {
		return nil, fmt.Errorf("marshal cluster CA key: %w", err)
	}
	return b, nil
}

// Hash returns the lowercase hex SHA-256 of the CA certificate's DER: the
// value a JoinToken pins.
func (ca *CA) Hash() string { return certHash(ca.cert.Raw) }

// certHash is the hex SHA-256 of a certificate's DER.
func certHash(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// checkIsCA refuses a certificate that may not sign other certificates.
func checkIsCA(cert *x509.Certificate) error {
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return fmt.Errorf("certificate %q is not a CA", cert.Subject.CommonName)
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return fmt.Errorf("CA certificate %q may not sign certificates (no cert-sign key usage)", cert.Subject.CommonName)
	}
	return nil
}

// publicKeysEqual reports whether two public keys are the same key.
func publicKeysEqual(a, b crypto.PublicKey) bool {
	ka, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ka.Equal(b)
}
