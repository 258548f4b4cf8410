package pki

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kici-dev/kici/internal/durable"
)

// MarshalCredential writes c as the content of a worker's credential file
// (KICI_CLUSTER_CREDENTIAL_FILE): three PEM blocks, in this order, the
// node's private key (PKCS #8), its current certificate and the cluster
// CA certificate. The content holds the key in the clear; keep it in a
// file only the worker can read (SaveCredentialFile).
func MarshalCredential(c *Credential) ([]byte, error) {
	keyPEM, err := marshalKeyPEM(c.key)
	if err != nil {
		return nil, fmt.Errorf("marshal credential of node %q: %w", c.nodeID, err)
	}
	cur := c.Current()
	out := keyPEM
	out = append(out, encodePEM(pemCertificate, cur.Leaf.Raw)...)
	out = append(out, encodePEM(pemCertificate, c.ca.Raw)...)
	return out, nil
}

// LoadCredential reads what MarshalCredential wrote, refusing anything
// but exactly its three blocks in its order, and checks it as
// NewCredential does. It does not check expiry: a worker that was off
// for too long finds NeedsRenewal true, or is refused by coordinators,
// and must join again with a new token.
func LoadCredential(data []byte) (*Credential, error) {
	want := []string{pemPrivateKey, pemCertificate, pemCertificate}
	blocks, err := decodePEMBlocks(data)
	if err != nil {
		return nil, fmt.Errorf("load credential: %w", err)
	}
	if len(blocks) != len(want) {
		return nil, fmt.Errorf("load credential: %d PEM blocks, want %d (key, certificate, CA certificate)", len(blocks), len(want))
	}
	for i, b := range blocks {
		if b.Type != want[i] {
			return nil, fmt.Errorf("load credential: PEM block %d is %q, want %q", i+1, b.Type, want[i])
		}
	}
	key, err := parseKeyDER(blocks[0].Bytes)
	if err != nil {
		return nil, fmt.Errorf("load credential: %w", err)
	}
	ca, err := x509.ParseCertificate(blocks[2].Bytes)
	if err != nil {
		return nil, fmt.Errorf("load credential: parse CA certificate: %w", err)
	}
	c, err := NewCredential(key, pem.EncodeToMemory(blocks[1]), ca)
	if err != nil {
		return nil, fmt.Errorf("load credential: %w", err)
	}
	return c, nil
}

// SaveCredentialFile replaces the file at path with data, mode 0600 (less
// what the umask removes), so that a crash leaves either the old content
// or the new, never a mix: it writes and syncs a temporary file in the
// same directory, renames it over path and syncs the directory. The
// directory must exist.
func SaveCredentialFile(path string, data []byte) error {
	var suffix [8]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("save credential file %s: %w", path, err)
	}
	tmp := path + ".tmp-" + hex.EncodeToString(suffix[:])
	// O_EXCL: never write through a file (or a link) already at tmp, nor
	// remove one that is not ours.
	if err := durable.WriteFile(tmp, data, os.O_CREATE|os.O_EXCL, 0o600); err != nil {
		if !errors.Is(err, os.ErrExist) {
			os.Remove(tmp)
		}
		return fmt.Errorf("save credential file %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save credential file %s: %w", path, err)
	}
	if err := durable.Sync(filepath.Dir(path)); err != nil {
		return fmt.Errorf("save credential file %s: %w", path, err)
	}
	return nil
}
