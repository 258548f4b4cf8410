package pki

import (
	"bytes"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCredentialReplaceRenews(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	server := serverConfigFor(t, ca)
	cred := newTestCredential(t, ca, "worker-1")
	client := ClientTLS(ca.Certificate(), cred, "localhost")

	srv, err := exchange(t, server, client)
	if err != nil || srv.err != nil {
		t.Fatalf("first exchange: client %v, server %v", err, srv.err)
	}
	first := srv.state.PeerCertificates[0].SerialNumber

	csr, err := cred.NewCSR()
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := ca.SignClient(csr, cred.NodeID(), 2*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := cred.Replace(renewed); err != nil {
		t.Fatalf("Replace(renewed certificate): %v", err)
	}
	want := mustParseCert(t, renewed).SerialNumber

	srv, err = exchange(t, server, client) // the same *tls.Config
	if err != nil || srv.err != nil {
		t.Fatalf("exchange after renewal: client %v, server %v", err, srv.err)
	}
	got := srv.state.PeerCertificates[0].SerialNumber
	if got.Cmp(want) != 0 || got.Cmp(first) == 0 {
		t.Errorf("server saw serial %v after renewal, want %v (first was %v)", got, want, first)
	}
}

func TestCredentialReplaceRefuses(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	other := newTestCA(t, "c1")
	cred := newTestCredential(t, ca, "worker-1")
	before := cred.Current().Leaf.SerialNumber

	sameKey := func(nodeID string) []byte {
		csr, err := NewCSR(cred.key, nodeID)
		if err != nil {
			t.Fatal(err)
		}
		certPEM, err := ca.SignClient(csr, nodeID, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return certPEM
	}
	_, otherKey := issueClient(t, ca, "worker-1", time.Hour, time.Now())
	csr, err := cred.NewCSR()
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := other.SignClient(csr, "worker-1", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.SignServer(cred.key.Public(), []string{"worker-1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		cert     []byte
		wantText string
	}{
		{name: "another node", cert: sameKey("worker-2"), wantText: `for node "worker-2"`},
		{name: "another key", cert: otherKey, wantText: "not for this node's key"},
		{name: "another CA", cert: otherCA, wantText: "not signed by the cluster CA"},
		{name: "serving certificate", cert: serving, wantText: "not for client authentication"},
		{name: "garbage", cert: []byte("garbage"), wantText: "not PEM"},
		{name: "chain of two", cert: append(sameKey("worker-1"), ca.CertPEM()...), wantText: "exactly one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := cred.Replace(tt.cert)
			if err == nil || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("Replace: got %v, want an error containing %q", err, tt.wantText)
			}
			if got := cred.Current().Leaf.SerialNumber; got.Cmp(before) != 0 {
				t.Errorf("a refused Replace changed the certificate to serial %v", got)
			}
		})
	}
}

func TestCredentialRenewalTimes(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	t0 := time.Now().Truncate(time.Second)
	key, certPEM := issueClient(t, ca, "worker-1", 3*time.Hour, t0)
	cred, err := NewCredential(key, certPEM, ca.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	if !cred.ExpiresAt().Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("ExpiresAt %v, want %v", cred.ExpiresAt(), t0.Add(3*time.Hour))
	}
	// Valid from t0-1m to t0+3h: two thirds of 3h1m after t0-1m.
	renewAt := t0.Add(-time.Minute).Add(2*time.Hour + 40*time.Second)
	if !cred.RenewAt().Equal(renewAt) {
		t.Errorf("RenewAt %v, want %v", cred.RenewAt(), renewAt)
	}
	tests := []struct {
		name string
		at   time.Time
		want bool
	}{
		{name: "just issued", at: t0, want: false},
		{name: "half way", at: t0.Add(90 * time.Minute), want: false},
		{name: "just before two thirds", at: renewAt.Add(-time.Second), want: false},
		{name: "at two thirds", at: renewAt, want: true},
		{name: "expired", at: t0.Add(4 * time.Hour), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := cred.NeedsRenewal(tt.at); got != tt.want {
				t.Errorf("NeedsRenewal(%v) = %v, want %v", tt.at, got, tt.want)
			}
		})
	}
}

// TestCredentialConcurrentReplace runs TLS reads against renewals (for
// the race detector).
func TestCredentialConcurrentReplace(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	cred := newTestCredential(t, ca, "worker-1")
	client := ClientTLS(ca.Certificate(), cred, "localhost")
	renewals := make([][]byte, 8)
	for i := range renewals {
		csr, err := cred.NewCSR()
		if err != nil {
			t.Fatal(err)
		}
		if renewals[i], err = ca.SignClient(csr, "worker-1", time.Hour, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c, err := client.GetClientCertificate(nil)
				if err != nil || c.Leaf == nil || len(c.Certificate) != 1 {
					t.Errorf("GetClientCertificate = %v, %v", c, err)
					return
				}
				_ = cred.NeedsRenewal(time.Now())
			}
		})
	}
	for _, r := range renewals {
		if err := cred.Replace(r); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestCredentialFileRoundTrip(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	cred := newTestCredential(t, ca, "worker-1")
	data, err := MarshalCredential(cred)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "peer-credential")
	if err := os.WriteFile(path, []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SaveCredentialFile(path, data); err != nil {
		t.Fatalf("SaveCredentialFile: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the credential file (no temporary files)", len(entries))
	}
	read, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read, data) {
		t.Fatal("the file does not hold what was saved")
	}
	loaded, err := LoadCredential(read)
	if err != nil {
		t.Fatalf("LoadCredential: %v", err)
	}
	if loaded.NodeID() != "worker-1" || !loaded.CA().Equal(ca.Certificate()) ||
		loaded.Current().Leaf.SerialNumber.Cmp(cred.Current().Leaf.SerialNumber) != 0 ||
		!publicKeysEqual(loaded.key.Public(), cred.key.Public()) {
		t.Error("the loaded credential differs from the saved one")
	}
	// The loaded credential works for a handshake.
	if srv, err := exchange(t, serverConfigFor(t, ca), ClientTLS(loaded.CA(), loaded, "localhost")); err != nil || srv.err != nil {
		t.Errorf("exchange with the loaded credential: client %v, server %v", err, srv.err)
	}
}

func TestLoadCredentialRefuses(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	a, err := MarshalCredential(newTestCredential(t, ca, "worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := MarshalCredential(newTestCredential(t, ca, "worker-2"))
	if err != nil {
		t.Fatal(err)
	}
	blocksOf := func(data []byte) [][]byte {
		var out [][]byte
		for {
			var b *pem.Block
			b, data = pem.Decode(data)
			if b == nil {
				return out
			}
			out = append(out, pem.EncodeToMemory(b))
		}
	}
	pa, pb := blocksOf(a), blocksOf(b)
	if len(pa) != 3 || len(pb) != 3 {
		t.Fatalf("split into %d and %d blocks, want 3 each", len(pa), len(pb))
	}
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name     string
		data     []byte
		wantText string
	}{
		{name: "empty", data: nil, wantText: "0 PEM blocks"},
		{name: "no CA", data: join(pa[0], pa[1]), wantText: "2 PEM blocks"},
		{name: "wrong order", data: join(pa[1], pa[0], pa[2]), wantText: `PEM block 1 is "CERTIFICATE"`},
		{name: "key of another node", data: join(pb[0], pa[1], pa[2]), wantText: "not for this node's key"},
		{name: "trailing text", data: join(a, []byte("junk")), wantText: "after PEM block 3"},
		{name: "leaf as CA", data: join(pa[0], pa[1], pb[1]), wantText: "not a CA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadCredential(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("LoadCredential: got %v, want an error containing %q", err, tt.wantText)
			}
		})
	}
}

func TestSaveCredentialFileMissingDir(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing", "peer-credential")
	if err := SaveCredentialFile(path, []byte("x")); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("SaveCredentialFile into a missing directory: %v, want an error naming the path", err)
	}
}
