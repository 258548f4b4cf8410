package secrets

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/kici-dev/kici/internal/durable"
)

// KeyFile is the file in the data dir that holds a generated key (SQLite
// only), and PendingKeyFile the new key while a rotation commits.
const (
	KeyFile        = "secret.key"
	PendingKeyFile = "secret.key.new"
)

// Key is a 256-bit AES key. It prints as a fingerprint, never as itself,
// so that logging one by mistake leaks nothing.
type Key struct{ b [32]byte }

// ParseKey reads a key written as 64 hex digits (white space around it is
// ignored).
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	if len(s) != 64 {
		return Key{}, fmt.Errorf("want 64 hex digits (32 bytes, e.g. from `openssl rand -hex 32`), got %d characters", len(s))
	}
	var k Key
	if _, err := hex.Decode(k.b[:], []byte(s)); err != nil {
		return Key{}, errors.New("want 64 hex digits (32 bytes, e.g. from `openssl rand -hex 32`), got a character that is not hex")
	}
	return k, nil
}

// GenerateKey returns a new random key.
func GenerateKey() Key {
	var k Key
	_, _ = rand.Read(k.b[:]) // crypto/rand.Read never fails
	return k
}

// Hex returns the key as 64 hex digits: for writing the key file only.
func (k Key) Hex() string { return hex.EncodeToString(k.b[:]) }

// Fingerprint names the key without revealing it: the first 8 bytes of
// its SHA-256, in hex.
func (k Key) Fingerprint() string {
	sum := sha256.Sum256(k.b[:])
	return hex.EncodeToString(sum[:8])
}

// String returns the fingerprint.
func (k Key) String() string { return "key:" + k.Fingerprint() }

// LogValue logs the fingerprint.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// GoString keeps %#v from printing the bytes.
func (k Key) GoString() string { return k.String() }

// KeyConfig says where the secret key comes from.
type KeyConfig struct {
	// Env is the value of KICI_SECRET_KEY; empty means unset.
	Env string
	// DataDir holds KeyFile when the key is not in Env.
	DataDir string
	// Generate allows creating KeyFile when Env is empty and there is no
	// file yet (SQLite only: coordinators sharing a PostgreSQL database
	// must share a key, so there it must come from the environment).
	Generate bool
}

// keySource is a loaded key and where it came from.
type keySource struct {
	key Key
	// file is the key file's path, or "" for KICI_SECRET_KEY.
	file string
	// generated is true when the file was created just now.
	generated bool
}

func (s keySource) String() string {
	if s.file == "" {
		return "KICI_SECRET_KEY"
	}
	return s.file
}

// loadKey reads the key from cfg: KICI_SECRET_KEY first, then the key
// file, which is generated if allowed.
func loadKey(cfg KeyConfig) (keySource, error) {
	if cfg.Env != "" {
		k, err := ParseKey(cfg.Env)
		if err != nil {
			return keySource{}, fmt.Errorf("KICI_SECRET_KEY: %w", err)
		}
		return keySource{key: k}, nil
	}
	if cfg.DataDir == "" {
		return keySource{}, errors.New("KICI_SECRET_KEY is required (64 hex digits, e.g. from `openssl rand -hex 32`)")
	}
	path := filepath.Join(cfg.DataDir, KeyFile)
	k, err := readKeyFile(path)
	if err == nil {
		return keySource{key: k, file: path}, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return keySource{}, err
	}
	if !cfg.Generate {
		return keySource{}, errors.New("KICI_SECRET_KEY is required with PostgreSQL (64 hex digits, e.g. from `openssl rand -hex 32`; every coordinator needs the same key)")
	}
	k = GenerateKey()
	if err := writeKeyFile(path, k); err != nil {
		return keySource{}, err
	}
	return keySource{key: k, file: path, generated: true}, nil
}

func readKeyFile(path string) (Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("read secret key file %s: %w", path, err)
	}
	k, err := ParseKey(string(data))
	if err != nil {
		return Key{}, fmt.Errorf("secret key file %s: %w", path, err)
	}
	return k, nil
}

// writeKeyFile writes k to path (mode 0600) and syncs it, replacing any
// file there.
func writeKeyFile(path string, k Key) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write secret key file %s: %w", path, err)
	}
	_, err = f.WriteString(k.Hex() + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = durable.Sync(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write secret key file %s: %w", path, err)
	}
	return nil
}
