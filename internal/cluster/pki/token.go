package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Join token format, version 1:
//
//	kjoin1.<ca-hash>.<id>.<secret>
//
// where:
//
//   - "kjoin1." names the thing (a kici join token, version 1) for a
//     reader and for secret scanners. It is not "kjt_", which starts job
//     tokens.
//   - <ca-hash> is the SHA-256 of the cluster CA certificate's DER, 64
//     lowercase hex digits (CA.Hash).
//   - <id> is 12 characters of lowercase base32 ([a-z2-7]), 60 random
//     bits. It is not secret: the coordinator finds the stored token by
//     it, and logs and audit entries may name it.
//   - <secret> is 32 random bytes as 64 lowercase hex digits. The
//     coordinator stores only HashSecret of it.
//
// A token is therefore always JoinTokenLength bytes long.
const (
	// JoinTokenPrefix starts every join token.
	JoinTokenPrefix = "kjoin1."
	// JoinTokenLength is the length of every encoded join token.
	JoinTokenLength = len(JoinTokenPrefix) + caHashLen + 1 + tokenIDLen + 1 + secretLen
	// maxJoinTokenInput bounds what ParseJoinToken looks at, white space
	// included, so a pasted file does not get parsed in full.
	maxJoinTokenInput = 512

	caHashLen      = 2 * sha256.Size
	tokenIDLen     = 12
	secretBytes    = 32
	secretLen      = 2 * secretBytes
	tokenIDLetters = "abcdefghijklmnopqrstuvwxyz234567" // base32, lowercase
)

// Errors of ParseJoinToken and JoinToken.VerifyCA.
var (
	// ErrMalformedToken is wrapped by every error of ParseJoinToken, with
	// what is wrong: a configuration error, not worth retrying.
	ErrMalformedToken = errors.New("malformed join token")
	// ErrCAMismatch means the CA certificate a coordinator offered is not
	// the one the join token pins: a man in the middle, or a token of
	// another cluster. The worker must not send the token's secret there.
	ErrCAMismatch = errors.New("cluster CA does not match the join token")
)

// JoinToken lets a worker join a cluster once: it pins the cluster CA
// and carries a secret that the coordinator checks against a stored hash.
//
// Encode gives the token as the worker is given it. String, GoString and
// LogValue leave the secret out, so a JoinToken printed with any fmt verb
// or logged with slog reveals only its ID and a prefix of the CA hash.
// (A JoinToken passed to encoding/json, or held in an unexported field of
// a struct that is printed, is not covered.)
type JoinToken struct {
	// CAHash is the hex SHA-256 of the cluster CA certificate's DER.
	CAHash string
	// ID names the token; it is not secret.
	ID string
	// Secret is the part that authenticates the worker.
	Secret string
}

// NewJoinToken makes a token for the CA whose hash (CA.Hash) is caHash,
// with a fresh ID and secret.
func NewJoinToken(caHash string) (JoinToken, error) {
	if err := checkLowerHex(caHash, caHashLen); err != nil {
		return JoinToken{}, fmt.Errorf("new join token: CA hash: %w", err)
	}
	idBytes := make([]byte, tokenIDLen)
	if _, err := rand.Read(idBytes); err != nil {
		return JoinToken{}, fmt.Errorf("new join token: %w", err)
	}
	for i, b := range idBytes {
		idBytes[i] = tokenIDLetters[b%32] // 32 divides 256: no bias
	}
	secret := make([]byte, secretBytes)
	if _, err := rand.Read(secret); err != nil {
		return JoinToken{}, fmt.Errorf("new join token: %w", err)
	}
	return JoinToken{CAHash: caHash, ID: string(idBytes), Secret: hex.EncodeToString(secret)}, nil
}

// ParseJoinToken reads a token written by Encode. White space around it
// is ignored; anything else that is not exactly the documented form is
// refused with an error wrapping ErrMalformedToken that names the part at
// fault. The error never quotes the input.
func ParseJoinToken(s string) (JoinToken, error) {
	if len(s) > maxJoinTokenInput {
		return JoinToken{}, fmt.Errorf("%w: %d bytes, want %d", ErrMalformedToken, len(s), JoinTokenLength)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return JoinToken{}, fmt.Errorf("%w: empty", ErrMalformedToken)
	}
	rest, ok := strings.CutPrefix(s, JoinTokenPrefix)
	if !ok {
		return JoinToken{}, fmt.Errorf("%w: does not start with %q", ErrMalformedToken, JoinTokenPrefix)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return JoinToken{}, fmt.Errorf("%w: %d dot-separated parts after %q, want 3 (CA hash, id, secret)", ErrMalformedToken, len(parts), JoinTokenPrefix)
	}
	tok := JoinToken{CAHash: parts[0], ID: parts[1], Secret: parts[2]}
	if err := checkLowerHex(tok.CAHash, caHashLen); err != nil {
		return JoinToken{}, fmt.Errorf("%w: CA hash: %w", ErrMalformedToken, err)
	}
	if err := checkTokenID(tok.ID); err != nil {
		return JoinToken{}, fmt.Errorf("%w: id: %w", ErrMalformedToken, err)
	}
	if err := checkLowerHex(tok.Secret, secretLen); err != nil {
		return JoinToken{}, fmt.Errorf("%w: secret: %w", ErrMalformedToken, err)
	}
	return tok, nil
}

// Encode returns the token in the form a worker is given
// (KICI_CLUSTER_JOIN_TOKEN), secret included. Show it once, store it
// nowhere but where the worker reads it.
func (t JoinToken) Encode() string {
	return JoinTokenPrefix + t.CAHash + "." + t.ID + "." + t.Secret
}

// String describes the token without its secret, e.g.
// "join token abcd2345efgh (CA sha256:0123456789ab…, secret redacted)".
func (t JoinToken) String() string {
	h := t.CAHash
	if len(h) > 12 {
		h = h[:12] + "…"
	}
	return fmt.Sprintf("join token %s (CA sha256:%s, secret redacted)", t.ID, h)
}

// GoString keeps %#v from printing the secret.
func (t JoinToken) GoString() string { return "pki.JoinToken{" + t.String() + "}" }

// LogValue logs the token's ID and CA hash, never its secret.
func (t JoinToken) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", t.ID), slog.String("ca_hash", t.CAHash))
}

// VerifyCA checks that certPEM, fetched from a coordinator over a channel
// not yet trusted, holds exactly one certificate, that it is the CA the
// token pins (compared in constant time) and that it is a CA. It returns
// the parsed certificate, which the worker then trusts alone. A mismatch
// wraps ErrCAMismatch and shows a prefix of both hashes.
func (t JoinToken) VerifyCA(certPEM []byte) (*x509.Certificate, error) {
	block, err := decodeOnePEM(certPEM, pemCertificate)
	if err != nil {
		return nil, fmt.Errorf("verify cluster CA: %w", err)
	}
	got := certHash(block.Bytes)
	if subtle.ConstantTimeCompare([]byte(got), []byte(t.CAHash)) != 1 {
		return nil, fmt.Errorf("%w: the coordinator sent sha256:%s…, the token pins sha256:%s…; a man in the middle, or a token of another cluster",
			ErrCAMismatch, hashPrefix(got), hashPrefix(t.CAHash))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("verify cluster CA: parse certificate: %w", err)
	}
	if err := checkIsCA(cert); err != nil {
		return nil, fmt.Errorf("verify cluster CA: %w", err)
	}
	return cert, nil
}

// HashSecret is what a coordinator stores for a join token's secret: the
// lowercase hex SHA-256 of the secret as written in the token.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SecretMatches reports, in constant time, whether secret hashes to the
// stored hash (a HashSecret result).
func SecretMatches(storedHash, secret string) bool {
	return subtle.ConstantTimeCompare([]byte(storedHash), []byte(HashSecret(secret))) == 1
}

// hashPrefix shortens a hash for an error message.
func hashPrefix(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}

// checkLowerHex refuses s unless it is n lowercase hex digits.
func checkLowerHex(s string, n int) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) != n {
		return fmt.Errorf("%d characters, want %d lowercase hex digits", len(s), n)
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("character %d is not a lowercase hex digit", i+1)
		}
	}
	return nil
}

// checkTokenID refuses id unless it is tokenIDLen base32 letters.
func checkTokenID(id string) error {
	if id == "" {
		return errors.New("empty")
	}
	if len(id) != tokenIDLen {
		return fmt.Errorf("%d characters, want %d of [a-z2-7]", len(id), tokenIDLen)
	}
	for i := range len(id) {
		if !strings.ContainsRune(tokenIDLetters, rune(id[i])) {
			return fmt.Errorf("character %d is not one of [a-z2-7]", i+1)
		}
	}
	return nil
}
