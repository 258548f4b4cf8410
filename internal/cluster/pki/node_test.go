package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSignClient(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	now := time.Now().Truncate(time.Second)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]crypto.Signer{"p256": p256, "ed25519": edKey} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const id = "0b8f6f1e-6d2a-4c39-9d3e-5f1f0a7c2e11"
			csr, err := NewCSR(key, id)
			if err != nil {
				t.Fatal(err)
			}
			certPEM, err := ca.SignClient(csr, id, 2*time.Hour, now)
			if err != nil {
				t.Fatalf("SignClient: %v", err)
			}
			c := mustParseCert(t, certPEM)
			if c.Subject.CommonName != id {
				t.Errorf("CommonName %q, want %q", c.Subject.CommonName, id)
			}
			if got, err := NodeIDOf(c); err != nil || got != id {
				t.Errorf("NodeIDOf = %q, %v; want %q", got, err, id)
			}
			if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || len(c.UnknownExtKeyUsage) != 0 {
				t.Errorf("ExtKeyUsage %v, want client authentication only", c.ExtKeyUsage)
			}
			if c.IsCA || !c.BasicConstraintsValid {
				t.Errorf("IsCA %v, BasicConstraintsValid %v; want a leaf", c.IsCA, c.BasicConstraintsValid)
			}
			if !c.NotBefore.Equal(now.Add(-time.Minute)) || !c.NotAfter.Equal(now.Add(2*time.Hour)) {
				t.Errorf("valid %v to %v, want %v to %v", c.NotBefore, c.NotAfter, now.Add(-time.Minute), now.Add(2*time.Hour))
			}
			if !publicKeysEqual(c.PublicKey, key.Public()) {
				t.Error("the certificate is not for the CSR's key")
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca.Certificate())
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("verify as a client certificate: %v", err)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
				t.Error("a worker certificate verifies as a server certificate")
			}
		})
	}
}

func TestSignClientRefuses(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	now := time.Now()
	good := mustCSR(t, "node-1")

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		csr      []byte
		nodeID   string
		ttl      time.Duration
		now      time.Time
		wantErr  error
		wantText string
	}{
		{name: "other common name", csr: mustCSR(t, "node-2"), nodeID: "node-1", wantText: `the request names "node-2"`},
		{name: "tampered signature", csr: tamperCSR(t, good), nodeID: "node-1", wantText: "signature"},
		{name: "rsa key", csr: rawCSR(t, rsaKey, "node-1"), nodeID: "node-1", wantErr: ErrUnsupportedKey, wantText: "*rsa.PublicKey"},
		{name: "p384 key", csr: rawCSR(t, p384, "node-1"), nodeID: "node-1", wantErr: ErrUnsupportedKey, wantText: "P-384"},
		{name: "ttl too short", csr: good, nodeID: "node-1", ttl: 59 * time.Second, wantText: "lifetime 59s is outside"},
		{name: "negative ttl", csr: good, nodeID: "node-1", ttl: -1, wantText: "is outside"},
		{name: "ttl too long", csr: good, nodeID: "node-1", ttl: MaxClientCertTTL + time.Second, wantText: "is outside"},
		{name: "past the CA", csr: good, nodeID: "node-1", now: now.Add(CAValidity - time.Hour), wantText: "the cluster CA expires"},
		{name: "garbage", csr: []byte("garbage"), nodeID: "node-1", wantText: "not PEM"},
		{name: "two requests", csr: append(append([]byte(nil), good...), good...), nodeID: "node-1", wantText: "exactly one"},
		{name: "certificate instead", csr: ca.CertPEM(), nodeID: "node-1", wantText: `want "CERTIFICATE REQUEST"`},
		{name: "empty node id", csr: good, nodeID: "", wantText: "node id must be 1 to 64 bytes"},
		{name: "node id with a slash", csr: rawCSR(t, mustKey(t), "a/b"), nodeID: "a/b", wantText: "character 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ttl, at := tt.ttl, tt.now
			if ttl == 0 {
				ttl = time.Hour
			}
			if at.IsZero() {
				at = now
			}
			certPEM, err := ca.SignClient(tt.csr, tt.nodeID, ttl, at)
			if err == nil {
				t.Fatalf("SignClient: issued %s, want an error containing %q", mustParseCert(t, certPEM).Subject, tt.wantText)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want it to wrap %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q, want it to contain %q", err, tt.wantText)
			}
		})
	}
}

func TestNewCSRRefusesRSA(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCSR(key, "node-1"); !errors.Is(err, ErrUnsupportedKey) {
		t.Fatalf("NewCSR(RSA key): %v, want ErrUnsupportedKey", err)
	}
}

func TestSignServer(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	key := mustKey(t)
	now := time.Now()
	certPEM, err := ca.SignServer(key.Public(), []string{"coord-1.example.com", "10.0.0.7", "::1"}, 24*time.Hour, now)
	if err != nil {
		t.Fatalf("SignServer: %v", err)
	}
	c := mustParseCert(t, certPEM)
	if !slices.Equal(c.DNSNames, []string{"coord-1.example.com"}) || len(c.IPAddresses) != 2 {
		t.Errorf("DNS %v, IP %v; want one DNS name and two IP addresses", c.DNSNames, c.IPAddresses)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || c.IsCA {
		t.Errorf("ExtKeyUsage %v, IsCA %v; want server authentication only, not a CA", c.ExtKeyUsage, c.IsCA)
	}
	if err := c.VerifyHostname("10.0.0.7"); err != nil {
		t.Errorf("VerifyHostname(IP): %v", err)
	}
	if _, err := NodeIDOf(c); err == nil {
		t.Error("NodeIDOf(server certificate) succeeded, want an error")
	}

	for name, hosts := range map[string][]string{
		"no hosts":   nil,
		"empty host": {""},
		"url":        {"https://coord-1"},
		"host:port":  {"coord-1:8443"},
	} {
		if _, err := ca.SignServer(key.Public(), hosts, time.Hour, now); err == nil {
			t.Errorf("%s: SignServer(%q) succeeded, want an error", name, hosts)
		}
	}
	if _, err := ca.SignServer(key.Public(), []string{"x"}, MaxServerCertTTL+time.Second, now); err == nil {
		t.Error("SignServer with a ttl past the maximum succeeded, want an error")
	}
}

func TestNodeIDOfRefuses(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	tests := []struct {
		name string
		cn   string
		uris []string
	}{
		{name: "no uri", cn: "node-1"},
		{name: "other scheme", cn: "node-1", uris: []string{"spiffe://node/node-1"}},
		{name: "two nodes", cn: "node-1", uris: []string{"kici://node/node-1", "kici://node/node-2"}},
		{name: "cn differs", cn: "node-2", uris: []string{"kici://node/node-1"}},
		{name: "bad id", cn: "a/b", uris: []string{"kici://node/a/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: tt.cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
			for _, u := range tt.uris {
				parsed, err := url.Parse(u)
				if err != nil {
					t.Fatal(err)
				}
				tmpl.URIs = append(tmpl.URIs, parsed)
			}
			certPEM, err := ca.sign(tmpl, mustKey(t).Public(), time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if id, err := NodeIDOf(mustParseCert(t, certPEM)); err == nil {
				t.Fatalf("NodeIDOf = %q, want an error", id)
			}
		})
	}
}

// mustKey returns a fresh node key.
func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rawCSR makes a CSR with any key and name, bypassing NewCSR's checks.
func rawCSR(t *testing.T, key any, cn string) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der})
}

// tamperCSR flips a bit in the last byte of a CSR, which lies in its
// signature: the request still parses but no longer verifies.
func tamperCSR(t *testing.T, csrPEM []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(csrPEM)
	der := append([]byte(nil), block.Bytes...)
	der[len(der)-1] ^= 0x01
	if _, err := x509.ParseCertificateRequest(der); err != nil {
		t.Fatalf("the tampered CSR no longer parses: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCSR, Bytes: der})
}
