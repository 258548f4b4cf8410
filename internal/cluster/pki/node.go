package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Bounds of a node certificate's lifetime. Certificates are short-lived
// and renewed over the cluster channel, so a stolen one is of use only
// briefly; a coordinator re-issues its serving certificate from the CA.
const (
	// MinCertTTL is the shortest lifetime SignClient and SignServer issue.
	MinCertTTL = time.Minute
	// MaxClientCertTTL is the longest lifetime of a worker certificate.
	MaxClientCertTTL = 7 * 24 * time.Hour
	// MaxServerCertTTL is the longest lifetime of a coordinator's serving
	// certificate.
	MaxServerCertTTL = 90 * 24 * time.Hour
)

// A node certificate names its node twice: as its subject's CommonName
// and as the URI SAN kici://node/<id>, which NodeIDOf reads.
const (
	nodeURIScheme = "kici"
	nodeURIHost   = "node"
	maxNodeIDLen  = 64
)

// ErrUnsupportedKey is wrapped when a key is neither ECDSA P-256 nor
// Ed25519, the only kinds node certificates are issued for.
var ErrUnsupportedKey = errors.New("unsupported key type (want ECDSA P-256 or Ed25519)")

// NewNodeKey generates a node's private key (ECDSA P-256). It never
// leaves the node: the coordinator sees only the CSR made from it.
func NewNodeKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate node key: %w", err)
	}
	return key, nil
}

// NewCSR makes a PEM certificate signing request for nodeID, signed by
// key (ECDSA P-256 or Ed25519), to send to a coordinator with a join
// token's secret or, to renew, over the mutual-TLS channel.
func NewCSR(key crypto.Signer, nodeID string) ([]byte, error) {
	if err := checkNodeID(nodeID); err != nil {
		return nil, fmt.Errorf("make certificate request: %w", err)
	}
	if err := checkPublicKey(key.Public()); err != nil {
		return nil, fmt.Errorf("make certificate request for node %q: %w", nodeID, err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: nodeID}}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("make certificate request for node %q: %w", nodeID, err)
	}
	return encodePEM(pemCSR, der), nil
}

// SignClient issues a worker's client certificate from a PEM CSR. The CSR
// must be correctly self-signed, name nodeID (the node the coordinator
// authenticated, by join token or by its current certificate) as its
// CommonName, and carry an ECDSA P-256 or Ed25519 key. Only the CSR's key
// and name are used; any extension it asks for is ignored. The
// certificate is valid from now less a minute (clock skew) to now+ttl,
// for client authentication only, and names the node in its CommonName
// and its URI SAN. ttl must lie within [MinCertTTL, MaxClientCertTTL].
func (ca *CA) SignClient(csrPEM []byte, nodeID string, ttl time.Duration, now time.Time) ([]byte, error) {
	if err := checkNodeID(nodeID); err != nil {
		return nil, fmt.Errorf("sign client certificate: %w", err)
	}
	if err := checkTTL(ttl, MaxClientCertTTL); err != nil {
		return nil, fmt.Errorf("sign client certificate for node %q: %w", nodeID, err)
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return nil, fmt.Errorf("sign client certificate for node %q: %w", nodeID, err)
	}
	if csr.Subject.CommonName != nodeID {
		return nil, fmt.Errorf("sign client certificate for node %q: the request names %q", nodeID, csr.Subject.CommonName)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: nodeID},
		URIs:        []*url.URL{nodeURI(nodeID)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certPEM, err := ca.sign(tmpl, csr.PublicKey, ttl, now)
	if err != nil {
		return nil, fmt.Errorf("sign client certificate for node %q: %w", nodeID, err)
	}
	return certPEM, nil
}

// SignServer issues a coordinator's serving certificate for pub (ECDSA
// P-256 or Ed25519), with a SAN for each of hosts: an IP address SAN for
// a literal IP, else a DNS SAN. It is for server authentication only and
// valid from now less a minute to now+ttl, ttl within [MinCertTTL,
// MaxServerCertTTL].
func (ca *CA) SignServer(pub crypto.PublicKey, hosts []string, ttl time.Duration, now time.Time) ([]byte, error) {
	if len(hosts) == 0 {
		return nil, errors.New("sign server certificate: no host names")
	}
	if err := checkTTL(ttl, MaxServerCertTTL); err != nil {
		return nil, fmt.Errorf("sign server certificate for %q: %w", hosts, err)
	}
	if err := checkPublicKey(pub); err != nil {
		return nil, fmt.Errorf("sign server certificate for %q: %w", hosts, err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kici coordinator"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		if h == "" || strings.ContainsAny(h, ":/ \t\r\n") {
			return nil, fmt.Errorf("sign server certificate: host %q is neither an IP address nor a DNS name", h)
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
	}
	certPEM, err := ca.sign(tmpl, pub, ttl, now)
	if err != nil {
		return nil, fmt.Errorf("sign server certificate for %q: %w", hosts, err)
	}
	return certPEM, nil
}

// sign completes an end-entity template (serial, validity, key usage,
// basic constraints), signs it for pub and returns it as PEM.
func (ca *CA) sign(tmpl *x509.Certificate, pub crypto.PublicKey, ttl time.Duration, now time.Time) ([]byte, error) {
	notAfter := now.Add(ttl)
	if notAfter.After(ca.cert.NotAfter) {
		return nil, fmt.Errorf("the cluster CA expires at %s, before the certificate would", ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-clockSkew)
	tmpl.NotAfter = notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	tmpl.IsCA = false
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, err
	}
	return encodePEM(pemCertificate, der), nil
}

// NodeIDOf returns the node a client certificate was issued to: the id in
// its kici://node/<id> URI SAN, which must be the only such SAN and agree
// with the CommonName. It does not verify the certificate; use it on a
// certificate that TLS has already verified against the cluster CA.
func NodeIDOf(cert *x509.Certificate) (string, error) {
	var id string
	found := 0
	for _, u := range cert.URIs {
		if u.Scheme != nodeURIScheme || u.Host != nodeURIHost {
			continue
		}
		found++
		if u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || !strings.HasPrefix(u.Path, "/") {
			return "", fmt.Errorf("certificate %q has a malformed node URI", cert.Subject.CommonName)
		}
		id = u.Path[1:]
	}
	switch {
	case found == 0:
		return "", fmt.Errorf("certificate %q names no node (no %s://%s/ URI)", cert.Subject.CommonName, nodeURIScheme, nodeURIHost)
	case found > 1:
		return "", fmt.Errorf("certificate %q names %d nodes, want one", cert.Subject.CommonName, found)
	}
	if err := checkNodeID(id); err != nil {
		return "", fmt.Errorf("certificate %q: %w", cert.Subject.CommonName, err)
	}
	if cert.Subject.CommonName != id {
		return "", fmt.Errorf("certificate names node %q in its URI but %q as its common name", id, cert.Subject.CommonName)
	}
	return id, nil
}

// nodeURI is the URI SAN naming a node.
func nodeURI(nodeID string) *url.URL {
	return &url.URL{Scheme: nodeURIScheme, Host: nodeURIHost, Path: "/" + nodeID}
}

// checkNodeID refuses a node id that is empty, longer than 64 bytes (the
// most a certificate's CommonName may hold) or has a character other than
// ASCII letters, digits, '.', '_' and '-'. Instance UUIDs pass.
func checkNodeID(id string) error {
	if id == "" || len(id) > maxNodeIDLen {
		return fmt.Errorf("node id must be 1 to %d bytes, got %d", maxNodeIDLen, len(id))
	}
	for i := range len(id) {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("node id %q: character %d is not a letter, digit, '.', '_' or '-'", id, i+1)
		}
	}
	return nil
}

// checkTTL refuses a certificate lifetime outside [MinCertTTL, limit].
func checkTTL(ttl, limit time.Duration) error {
	if ttl < MinCertTTL || ttl > limit {
		return fmt.Errorf("lifetime %s is outside %s to %s", ttl, MinCertTTL, limit)
	}
	return nil
}

// checkPublicKey accepts ECDSA P-256 and Ed25519 public keys only.
func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == nil {
			return fmt.Errorf("%w: ECDSA without a curve", ErrUnsupportedKey)
		}
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("%w: ECDSA on curve %s", ErrUnsupportedKey, k.Curve.Params().Name)
		}
		return nil
	case ed25519.PublicKey:
		return nil
	default:
		return fmt.Errorf("%w: %T", ErrUnsupportedKey, pub)
	}
}

// parseCSR reads exactly one PEM certificate request and checks its
// signature and key type.
func parseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	block, err := decodeOnePEM(csrPEM, pemCSR)
	if err != nil {
		return nil, err
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	if err := checkPublicKey(csr.PublicKey); err != nil {
		return nil, err
	}
	return csr, nil
}
