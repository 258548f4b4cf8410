package secrets

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/store"
)

// PurposeClusterCAKey is the purpose the cluster CA's private key is
// sealed for; Rotate re-seals it with the secrets.
const PurposeClusterCAKey = "cluster-ca-key"

// sealedBlobPrefix starts a sealed blob: "kici-blob:<key version>:<envelope>".
const sealedBlobPrefix = "kici-blob:"

// blobAAD binds a sealed blob to its purpose, so that a blob sealed for
// one use does not open for another. The purpose comes last, so the
// encoding is unambiguous.
func blobAAD(purpose string) []byte { return []byte("kici-blob\x00v1\x00" + purpose) }

// SealBlob seals plain, a value kici itself must keep secret at rest (the
// cluster CA's private key, say), under the secret key in use, with
// purpose bound as additional data: OpenBlob opens it only for the same
// purpose. The result is text, safe to store in a column.
//
// Key rotation (Rotate) re-seals the blobs it knows of (the cluster CA's
// key, PurposeClusterCAKey); any other blob sealed before a rotation no
// longer opens after it, and OpenBlob says so.
func (s *Service) SealBlob(purpose string, plain []byte) (string, error) {
	if purpose == "" {
		return "", errors.New("seal blob: purpose is required")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	env, err := seal(s.src.key, blobAAD(purpose), plain)
	if err != nil {
		return "", fmt.Errorf("seal blob for %q: %w", purpose, err)
	}
	return sealedBlobPrefix + strconv.Itoa(s.version) + ":" + env, nil
}

// OpenBlob returns what SealBlob sealed for purpose. A blob sealed for
// another purpose, under another key, or altered, gives an error wrapping
// ErrOpen; one sealed under an earlier key version says which.
func (s *Service) OpenBlob(purpose, sealed string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, sealedBlobPrefix)
	if !ok {
		return nil, fmt.Errorf("open blob for %q: %w: not a sealed blob", purpose, ErrOpen)
	}
	ver, env, ok := strings.Cut(rest, ":")
	version, err := strconv.Atoi(ver)
	if !ok || err != nil {
		return nil, fmt.Errorf("open blob for %q: %w: malformed key version", purpose, ErrOpen)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.openBlobLocked(purpose, version, env)
}

// openBlobLocked opens the envelope of a blob sealed under key version
// version; s.mu is held.
func (s *Service) openBlobLocked(purpose string, version int, env string) ([]byte, error) {
	if version != s.version {
		return nil, fmt.Errorf("open blob for %q: sealed under key version %d, the key in use is version %d: %w", purpose, version, s.version, ErrOpen)
	}
	plain, err := open(s.src.key, blobAAD(purpose), env)
	if err != nil {
		return nil, fmt.Errorf("open blob for %q: %w", purpose, err)
	}
	return plain, nil
}

// resealClusterCA re-seals, in tx, the cluster CA's key under newKey as
// key version version; a database without a CA has nothing to re-seal.
// s.mu is held.
func (s *Service) resealClusterCA(ctx context.Context, tx *store.Tx, newKey Key, version int) error {
	row, err := tx.GetClusterCA(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rest, ok := strings.CutPrefix(row.KeySealed, sealedBlobPrefix)
	ver, env, ok2 := strings.Cut(rest, ":")
	old, err := strconv.Atoi(ver)
	if !ok || !ok2 || err != nil {
		return fmt.Errorf("re-seal the cluster CA key: %w: malformed sealed blob", ErrOpen)
	}
	plain, err := s.openBlobLocked(PurposeClusterCAKey, old, env)
	if err != nil {
		return fmt.Errorf("re-seal the cluster CA key: %w", err)
	}
	sealed, err := seal(newKey, blobAAD(PurposeClusterCAKey), plain)
	if err != nil {
		return fmt.Errorf("re-seal the cluster CA key: %w", err)
	}
	return tx.ResealClusterCA(ctx, sealedBlobPrefix+strconv.Itoa(version)+":"+sealed)
}
