package pki

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
)

// PEM block types this package reads and writes.
const (
	pemCertificate = "CERTIFICATE"
	pemCSR         = "CERTIFICATE REQUEST"
	pemPrivateKey  = "PRIVATE KEY" // PKCS #8
)

// decodePEMBlocks splits data into PEM blocks. Unlike pem.Decode, which
// skips text around blocks, it refuses anything but white space between
// them, and blocks with headers (the legacy encrypted form).
func decodePEMBlocks(data []byte) ([]*pem.Block, error) {
	var blocks []*pem.Block
	for {
		data = bytes.TrimLeft(data, " \t\r\n")
		if len(data) == 0 {
			return blocks, nil
		}
		if !bytes.HasPrefix(data, []byte("-----BEGIN ")) {
			if len(blocks) == 0 {
				return nil, errors.New("not PEM: does not start with a -----BEGIN line")
			}
			return nil, fmt.Errorf("text that is not PEM after PEM block %d", len(blocks))
		}
		b, rest := pem.Decode(data)
		// pem.Decode skips a malformed block and returns the next one; a
		// second BEGIN line in what it consumed means it did.
		if b == nil || bytes.Count(data[:len(data)-len(rest)], []byte("-----BEGIN ")) != 1 {
			return nil, fmt.Errorf("PEM block %d is malformed", len(blocks)+1)
		}
		data = rest
		if len(b.Headers) != 0 {
			return nil, fmt.Errorf("PEM block %d (%s) has headers, want none", len(blocks)+1, b.Type)
		}
		blocks = append(blocks, b)
	}
}

// decodeOnePEM returns the only PEM block in data, which must be of type
// want, with nothing but white space around it.
func decodeOnePEM(data []byte, want string) (*pem.Block, error) {
	blocks, err := decodePEMBlocks(data)
	if err != nil {
		return nil, err
	}
	switch {
	case len(blocks) == 0:
		return nil, fmt.Errorf("no %s PEM block found", want)
	case len(blocks) > 1:
		return nil, fmt.Errorf("%d PEM blocks, want exactly one %s block", len(blocks), want)
	case blocks[0].Type != want:
		return nil, fmt.Errorf("PEM block is %q, want %q", blocks[0].Type, want)
	}
	return blocks[0], nil
}

// parseCertPEM parses data holding exactly one certificate.
func parseCertPEM(data []byte) (*x509.Certificate, error) {
	block, err := decodeOnePEM(data, pemCertificate)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return cert, nil
}

// encodePEM returns one PEM block.
func encodePEM(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// marshalKeyPEM writes key as a PKCS #8 PEM block.
func marshalKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return encodePEM(pemPrivateKey, der), nil
}

// parseKeyDER reads a PKCS #8 private key that can sign.
func parseKeyDER(der []byte) (crypto.Signer, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", k)
	}
	return signer, nil
}

// serialSpan is how many serial numbers newSerial draws from: 1 to
// 2^128-1, so a serial is random, positive and at most 128 bits.
var serialSpan = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

// newSerial returns a random certificate serial number.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, serialSpan)
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
