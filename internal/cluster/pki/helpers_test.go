package pki

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// newTestCA creates a CA valid from now.
func newTestCA(t *testing.T, name string) *CA {
	t.Helper()
	ca, err := NewCA(name, time.Now())
	if err != nil {
		t.Fatalf("NewCA(%q): %v", name, err)
	}
	return ca
}

// issueClient makes a node key and a client certificate for nodeID,
// issued at now for ttl.
func issueClient(t *testing.T, ca *CA, nodeID string, ttl time.Duration, now time.Time) (crypto.Signer, []byte) {
	t.Helper()
	key, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key, nodeID)
	if err != nil {
		t.Fatalf("NewCSR: %v", err)
	}
	certPEM, err := ca.SignClient(csr, nodeID, ttl, now)
	if err != nil {
		t.Fatalf("SignClient: %v", err)
	}
	return key, certPEM
}

// newTestCredential issues a credential for nodeID, valid for an hour
// from now.
func newTestCredential(t *testing.T, ca *CA, nodeID string) *Credential {
	t.Helper()
	key, certPEM := issueClient(t, ca, nodeID, time.Hour, time.Now())
	cred, err := NewCredential(key, certPEM, ca.Certificate())
	if err != nil {
		t.Fatalf("NewCredential: %v", err)
	}
	return cred
}

// newServerCert issues a coordinator serving certificate for localhost
// and 127.0.0.1.
func newServerCert(t *testing.T, ca *CA) tls.Certificate {
	t.Helper()
	key, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignServer(key.Public(), []string{"localhost", "127.0.0.1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatalf("SignServer: %v", err)
	}
	leaf, err := parseCertPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
}

// serverSide is what the server end of exchange saw.
type serverSide struct {
	state tls.ConnectionState
	err   error
}

// exchange accepts one TLS connection on loopback with serverCfg, dials
// it with clientCfg, and has the client send "ping" and the server answer
// "pong". It returns the server's view and the client's error, if any.
func exchange(t *testing.T, serverCfg, clientCfg *tls.Config) (serverSide, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	done := make(chan serverSide, 1)
	go func() {
		done <- serve(ctx, ln, serverCfg)
	}()

	clientErr := func() error {
		d := tls.Dialer{Config: clientCfg}
		conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		defer conn.Close()
		deadline, _ := ctx.Deadline()
		_ = conn.SetDeadline(deadline)
		if _, err := conn.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(conn, buf); err != nil {
			return err
		}
		if string(buf) != "pong" {
			return errors.New("client read " + string(buf) + ", want pong")
		}
		return nil
	}()
	if clientErr != nil {
		ln.Close() // the server may still be waiting in Accept
	}
	srv := <-done
	t.Logf("server: %v; client: %v", srv.err, clientErr)
	return srv, clientErr
}

// serve handles one connection for exchange.
func serve(ctx context.Context, ln net.Listener, cfg *tls.Config) serverSide {
	conn, err := ln.Accept()
	if err != nil {
		return serverSide{err: err}
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	tc := tls.Server(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return serverSide{err: err}
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(tc, buf); err != nil {
		return serverSide{err: err}
	}
	if string(buf) != "ping" {
		return serverSide{err: errors.New("server read " + string(buf) + ", want ping")}
	}
	if _, err := tc.Write([]byte("pong")); err != nil {
		return serverSide{err: err}
	}
	return serverSide{state: tc.ConnectionState()}
}

// serverConfigFor returns a ServerTLS config of ca with a fresh serving
// certificate.
func serverConfigFor(t *testing.T, ca *CA) *tls.Config {
	t.Helper()
	return ServerTLS(ca.Certificate(), newServerCert(t, ca))
}

// mustParseCert parses one PEM certificate.
func mustParseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCertPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
