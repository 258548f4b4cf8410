package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ServerTLS returns the TLS configuration of a coordinator's cluster
// listener: TLS 1.3 only, serving serverCert, and requiring every client
// to present a certificate that chains to the cluster CA ca (and to no
// other root), is valid now, is meant for client authentication and names
// a node (NodeIDOf). A handler reads the node from
// ConnectionState().PeerCertificates[0].
//
// A worker's first join has no certificate yet; it must reach a listener
// that does not demand one (see the package documentation).
func ServerTLS(ca *x509.Certificate, serverCert tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("cluster client presented no certificate")
			}
			if _, err := NodeIDOf(cs.PeerCertificates[0]); err != nil {
				return fmt.Errorf("cluster client certificate: %w", err)
			}
			return nil
		},
	}
}

// ClientTLS returns the TLS configuration a worker dials coordinators
// with: TLS 1.3 only, trusting the cluster CA ca alone (not the system
// roots), checking the coordinator's certificate against serverName (a
// host name or IP address it was issued for), and presenting the current
// certificate of cred at every handshake, so a renewal takes effect on
// the next connection. A nil cred presents no certificate: that is the
// first join, which the token's secret authenticates instead.
func ClientTLS(ca *x509.Certificate, cred *Credential, serverName string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cred == nil {
				return &tls.Certificate{}, nil
			}
			c := cred.Current()
			return &c, nil
		},
	}
}
