package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// envelopeVersion starts every sealed value, so that a later format can
// be told apart.
const envelopeVersion = "v1:"

// ErrOpen is a sealed value that does not open: the wrong key, or the
// value was altered or moved to another secret's row.
var ErrOpen = errors.New("sealed value does not open with this key (wrong key, or the value was altered or moved)")

// secretAAD binds a secret's sealed value to its scope and name: moved to
// another row, it does not open. NUL cannot occur in either, so the
// encoding is unambiguous.
func secretAAD(scope, name string) []byte {
	return []byte("kici-secret\x00v1\x00" + scope + "\x00" + name)
}

// keyCheckAAD and keyCheckValue make the key check: a known value sealed
// under the current key.
var (
	keyCheckAAD   = []byte("kici-secret-key-check\x00v1")
	keyCheckValue = []byte("kici secret key check")
)

// seal encrypts plaintext with AES-256-GCM under k, with a fresh random
// 96-bit nonce and aad as additional authenticated data, and returns
// "v1:" + base64(nonce ‖ ciphertext ‖ tag).
func seal(k Key, aad, plaintext []byte) (string, error) {
	gcm, err := newGCM(k)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, gcm.NonceSize(), gcm.NonceSize()+len(plaintext)+gcm.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("make nonce: %w", err)
	}
	out := gcm.Seal(nonce, nonce, plaintext, aad)
	return envelopeVersion + base64.RawStdEncoding.EncodeToString(out), nil
}

// open reverses seal; any mismatch of key, aad or bytes gives ErrOpen.
func open(k Key, aad []byte, sealed string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, envelopeVersion)
	if !ok {
		return nil, fmt.Errorf("%w: unknown envelope format", ErrOpen)
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64", ErrOpen)
	}
	gcm, err := newGCM(k)
	if err != nil {
		return nil, err
	}
	if len(raw) < gcm.NonceSize()+gcm.Overhead() {
		return nil, fmt.Errorf("%w: too short", ErrOpen)
	}
	pt, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

func newGCM(k Key) (cipher.AEAD, error) {
	block, err := aes.NewCipher(k.b[:])
	if err != nil {
		return nil, fmt.Errorf("aes cipher: %w", err)
	}
	return cipher.NewGCM(block)
}
