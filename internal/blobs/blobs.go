package blobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"strings"
	"time"
)

var (
	// ErrNotFound is returned by Open and Stat for a key that holds no
	// blob.
	ErrNotFound = errors.New("blob not found")
	// ErrTooLarge is returned (wrapped in a *LimitError) by Put when the
	// reader holds more bytes than the limit; nothing is stored.
	ErrTooLarge = errors.New("blob too large")
	// ErrDigestMismatch is returned by Put when the bytes read do not have
	// the SHA-256 the caller expected (nothing is stored), and by the
	// reader of Verify when the bytes read do not have the one recorded.
	ErrDigestMismatch = errors.New("sha256 mismatch")
	// ErrBadKey is returned for a key that is not a valid blob key.
	ErrBadKey = errors.New("invalid blob key")
)

// LimitError is a Put refused for its size: Limit is the bound it went
// over. It unwraps to ErrTooLarge.
type LimitError struct {
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%v: more than %d bytes", ErrTooLarge, e.Limit)
}

func (e *LimitError) Unwrap() error { return ErrTooLarge }

// Info describes a stored blob.
type Info struct {
	// Key is the blob's key.
	Key string
	// Size is its length in bytes.
	Size int64
	// SHA256 is its lowercase hex SHA-256. Put fills it; Stat and List
	// leave it empty (the database records it, and Verify checks it).
	SHA256 string
	// ModTime is when it was stored.
	ModTime time.Time
}

// Store keeps blobs by key. Keys are slash-separated paths of the
// characters [A-Za-z0-9._-], with no empty, "." or ".." element (see
// ValidKey); the caller makes them unique (a row ID in them).
//
// Every method may be called concurrently, for the same key too: Put is
// atomic (a reader sees the whole earlier blob or the whole new one,
// never a part), and a blob Open returned stays readable until its reader
// is closed, even if the key is deleted or replaced meanwhile. A
// cancelled ctx makes a Put fail without storing anything.
type Store interface {
	// Put stores the bytes of r under key, replacing a blob already
	// there. It reads at most limit bytes: a reader with more fails with a
	// *LimitError, and nothing is stored. When wantSHA256 is not empty and
	// the bytes read have another digest it fails with ErrDigestMismatch,
	// and nothing is stored. After a failure, the key holds what it held
	// before.
	Put(ctx context.Context, key string, r io.Reader, limit int64, wantSHA256 string) (Info, error)
	// Open returns a reader of the blob at key (the caller closes it) and
	// its Info, or ErrNotFound.
	Open(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat returns the Info of the blob at key, or ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the blob at key. A key that holds nothing is not an
	// error.
	Delete(ctx context.Context, key string) error
	// List calls fn with every blob whose key starts with prefix, in no
	// particular order, until fn returns an error (which List returns).
	// Blobs stored or deleted while it runs may or may not be listed.
	List(ctx context.Context, prefix string, fn func(Info) error) error
}

// keyRE is one element of a blob key.
var keyRE = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}$`)

// maxKeyLen bounds a blob key.
const maxKeyLen = 512

// ValidKey reports whether key can name a blob (see Store).
func ValidKey(key string) bool {
	if key == "" || len(key) > maxKeyLen {
		return false
	}
	for part := range strings.SplitSeq(key, "/") {
		if !keyRE.MatchString(part) || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// checkKey returns ErrBadKey, naming key, when it is not valid.
func checkKey(key string) error {
	if !ValidKey(key) {
		return fmt.Errorf("%w: %q", ErrBadKey, key)
	}
	return nil
}

// Verify returns a reader of rc that fails with ErrDigestMismatch at its
// end (instead of io.EOF) when the bytes read do not have the SHA-256
// want (lowercase hex). Closing it closes rc. A caller that streams the
// bytes on (to an HTTP client) learns of a corrupt blob only at the end,
// and must then break the stream off rather than end it cleanly.
func Verify(rc io.ReadCloser, want string) io.ReadCloser {
	return &verifier{rc: rc, h: sha256.New(), want: want}
}

type verifier struct {
	rc   io.ReadCloser
	h    hash.Hash
	want string
	n    int64
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("%w: %d bytes with sha256 %s, want %s", ErrDigestMismatch, v.n, got, v.want)
		}
	}
	return n, err
}

func (v *verifier) Close() error { return v.rc.Close() }

// CollectOrphans deletes the blobs under prefix stored before cutoff that
// the set keys returns does not name, and returns how many it deleted.
// keys is read after the listing, so a blob whose row is written while
// CollectOrphans runs is kept; cutoff must leave the writers of a blob
// time to write its row.
func CollectOrphans(ctx context.Context, s Store, prefix string, cutoff time.Time, keys func(context.Context) (map[string]bool, error)) (int, error) {
	var old []string
	if err := s.List(ctx, prefix, func(i Info) error {
		if i.ModTime.Before(cutoff) {
			old = append(old, i.Key)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if len(old) == 0 {
		return 0, nil
	}
	known, err := keys(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range old {
		if known[k] {
			continue
		}
		if err := s.Delete(ctx, k); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
