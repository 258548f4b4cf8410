package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func TestNewCA(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ca, err := NewCA("prod-eu", now)
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Certificate()
	if !c.IsCA || !c.BasicConstraintsValid || !c.MaxPathLenZero || c.MaxPathLen != 0 {
		t.Errorf("IsCA %v, BasicConstraintsValid %v, MaxPathLen %d (zero %v); want a CA with path length zero",
			c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.MaxPathLenZero)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign; c.KeyUsage != want {
		t.Errorf("key usage %v, want %v", c.KeyUsage, want)
	}
	if got, want := c.NotBefore, now.Add(-time.Minute); !got.Equal(want) {
		t.Errorf("NotBefore %v, want %v", got, want)
	}
	if got, want := c.NotAfter, now.Add(CAValidity); !got.Equal(want) {
		t.Errorf("NotAfter %v, want %v", got, want)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v, want positive and at most 128 bits", c.SerialNumber)
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", c.PublicKey)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if !strings.Contains(c.Subject.CommonName, "prod-eu") {
		t.Errorf("subject %q does not name the cluster", c.Subject.CommonName)
	}
	sum := sha256.Sum256(c.Raw)
	if got, want := ca.Hash(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Hash() = %s, want %s", got, want)
	}
	other := newTestCA(t, "prod-eu")
	if other.Certificate().SerialNumber.Cmp(c.SerialNumber) == 0 || other.Hash() == ca.Hash() {
		t.Error("two CAs share a serial or a hash")
	}
}

func TestNewCARefusesBadName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", strings.Repeat("a", 64)} {
		if _, err := NewCA(name, time.Now()); err == nil {
			t.Errorf("NewCA(%d-byte name) succeeded, want an error", len(name))
		}
	}
}

func TestLoadCARoundTrip(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	keyPEM, err := ca.MarshalKey()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(keyPEM, []byte("-----BEGIN PRIVATE KEY-----")) {
		t.Errorf("key is not a PKCS #8 PEM block:\n%s", keyPEM)
	}
	loaded, err := LoadCA(ca.CertPEM(), keyPEM)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	if loaded.Hash() != ca.Hash() {
		t.Errorf("loaded CA hash %s, want %s", loaded.Hash(), ca.Hash())
	}
	// The loaded CA signs certificates the original's certificate verifies.
	_, certPEM := issueClient(t, loaded, "node-1", time.Hour, time.Now())
	if err := mustParseCert(t, certPEM).CheckSignatureFrom(ca.Certificate()); err != nil {
		t.Errorf("certificate from the loaded CA: %v", err)
	}
}

func TestLoadCARefuses(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	keyPEM, err := ca.MarshalKey()
	if err != nil {
		t.Fatal(err)
	}
	otherKeyPEM, err := newTestCA(t, "c2").MarshalKey()
	if err != nil {
		t.Fatal(err)
	}
	leafKey, leafPEM := issueClient(t, ca, "node-1", time.Hour, time.Now())
	leafKeyPEM, err := marshalKeyPEM(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		cert     []byte
		key      []byte
		wantText string
	}{
		{name: "key of another CA", cert: ca.CertPEM(), key: otherKeyPEM, wantText: "does not match"},
		{name: "leaf certificate", cert: leafPEM, key: leafKeyPEM, wantText: "not a CA"},
		{name: "garbage certificate", cert: []byte("not pem"), key: keyPEM, wantText: "not PEM"},
		{name: "two certificates", cert: append(ca.CertPEM(), ca.CertPEM()...), key: keyPEM, wantText: "exactly one"},
		{name: "certificate as key", cert: ca.CertPEM(), key: ca.CertPEM(), wantText: "want \"PRIVATE KEY\""},
		{name: "no key", cert: ca.CertPEM(), key: nil, wantText: "no PRIVATE KEY PEM block"},
		{name: "malformed block first", cert: append([]byte("-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n"), ca.CertPEM()...), key: keyPEM, wantText: "PEM block 1 is malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadCA(tt.cert, tt.key)
			if err == nil || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("LoadCA: got %v, want an error containing %q", err, tt.wantText)
			}
		})
	}
}
