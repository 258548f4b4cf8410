package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"
)

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	other := newTestCA(t, "c1") // same name, different CA
	server := serverConfigFor(t, ca)

	good := newTestCredential(t, ca, "worker-1")
	foreign := newTestCredential(t, other, "worker-1")
	expiredKey, expiredPEM := issueClient(t, ca, "worker-1", time.Hour, time.Now().Add(-3*time.Hour))
	expired, err := NewCredential(expiredKey, expiredPEM, ca.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	// A certificate of the cluster CA for client authentication that
	// names no node.
	anonKey := mustKey(t)
	anonPEM, err := ca.sign(&x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, anonKey.Public(), time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	anon := tls.Certificate{Certificate: [][]byte{mustParseCert(t, anonPEM).Raw}, PrivateKey: anonKey}
	anonClient := ClientTLS(ca.Certificate(), nil, "localhost")
	anonClient.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &anon, nil }
	// A coordinator's serving certificate presented as a client one.
	serverAsClient := ClientTLS(ca.Certificate(), nil, "localhost")
	srvCert := newServerCert(t, ca)
	serverAsClient.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &srvCert, nil }

	tests := []struct {
		name          string
		server        *tls.Config
		client        *tls.Config
		wantServerErr bool
		wantClientErr bool
		// clientErrIs, when set, is what the client's error must match.
		clientErrIs func(error) bool
	}{
		{name: "cluster worker", server: server, client: ClientTLS(ca.Certificate(), good, "localhost")},
		{name: "server by IP address", server: server, client: ClientTLS(ca.Certificate(), good, "127.0.0.1")},
		{name: "certificate of another CA", server: server, client: ClientTLS(ca.Certificate(), foreign, "localhost"), wantServerErr: true, wantClientErr: true},
		{name: "no certificate", server: server, client: ClientTLS(ca.Certificate(), nil, "localhost"), wantServerErr: true, wantClientErr: true},
		{name: "expired certificate", server: server, client: ClientTLS(ca.Certificate(), expired, "localhost"), wantServerErr: true, wantClientErr: true},
		{name: "serving certificate as client", server: server, client: serverAsClient, wantServerErr: true, wantClientErr: true},
		{name: "certificate naming no node", server: server, client: anonClient, wantServerErr: true, wantClientErr: true},
		{
			name: "server of another CA", server: serverConfigFor(t, other), client: ClientTLS(ca.Certificate(), good, "localhost"),
			wantServerErr: true, wantClientErr: true,
			clientErrIs: func(err error) bool { return errors.As(err, new(x509.UnknownAuthorityError)) },
		},
		{
			name: "server under another name", server: server, client: ClientTLS(ca.Certificate(), good, "coord-9.example.com"),
			wantServerErr: true, wantClientErr: true,
			clientErrIs: func(err error) bool { return errors.As(err, new(x509.HostnameError)) },
		},
		{
			name:   "client below TLS 1.3",
			server: server,
			client: func() *tls.Config {
				c := ClientTLS(ca.Certificate(), good, "localhost")
				c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
				return c
			}(),
			wantServerErr: true, wantClientErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, clientErr := exchange(t, tt.server, tt.client)
			if (srv.err != nil) != tt.wantServerErr {
				t.Errorf("server error %v, want error: %v", srv.err, tt.wantServerErr)
			}
			if (clientErr != nil) != tt.wantClientErr {
				t.Errorf("client error %v, want error: %v", clientErr, tt.wantClientErr)
			}
			if tt.clientErrIs != nil && !tt.clientErrIs(clientErr) {
				t.Errorf("client error %v is not the expected kind", clientErr)
			}
			if srv.err != nil {
				return
			}
			if srv.state.Version != tls.VersionTLS13 {
				t.Errorf("TLS version %x, want 1.3", srv.state.Version)
			}
			if len(srv.state.PeerCertificates) == 0 {
				t.Fatal("the server saw no client certificate")
			}
			if id, err := NodeIDOf(srv.state.PeerCertificates[0]); err != nil || id != "worker-1" {
				t.Errorf("server sees node %q (%v), want worker-1", id, err)
			}
		})
	}
}

func TestServerTLSSettings(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c1")
	cfg := serverConfigFor(t, ca)
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.MinVersion != tls.VersionTLS13 {
		t.Errorf("ClientAuth %v, MinVersion %x; want RequireAndVerifyClientCert and TLS 1.3", cfg.ClientAuth, cfg.MinVersion)
	}
	want := x509.NewCertPool()
	want.AddCert(ca.Certificate())
	if !cfg.ClientCAs.Equal(want) {
		t.Error("ClientCAs is not the cluster CA alone")
	}
	client := ClientTLS(ca.Certificate(), nil, "localhost")
	if !client.RootCAs.Equal(want) || client.InsecureSkipVerify || client.MinVersion != tls.VersionTLS13 {
		t.Error("ClientTLS does not trust the cluster CA alone over TLS 1.3")
	}
}
