package blobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kici-dev/kici/internal/durable"
)

// tmpDir is the directory under a Dir's root that holds blobs being
// written; it is not a valid key element, so no key can name it.
const tmpDir = ".tmp"

// Dir is a Store that keeps each blob as a file under a directory: key
// "a/b" is the file ROOT/a/b. A blob is written to ROOT/.tmp first,
// synced, renamed into place and its directory synced, so a crash leaves
// either the whole blob or none of it (and perhaps a temporary file, which
// NewDir removes).
//
// The directory must belong to one Dir at a time (one orchestrator
// process, which the data dir's lock ensures).
type Dir struct {
	root string
}

var _ Store = (*Dir)(nil)

// NewDir returns a Dir rooted at root, creating it (mode 0700) when
// missing, and removes the temporary files an earlier process left.
func NewDir(root string) (*Dir, error) {
	if err := os.MkdirAll(filepath.Join(root, tmpDir), 0o700); err != nil {
		return nil, fmt.Errorf("create blob directory %s: %w", root, err)
	}
	entries, err := os.ReadDir(filepath.Join(root, tmpDir))
	if err != nil {
		return nil, fmt.Errorf("read blob directory %s: %w", root, err)
	}
	for _, e := range entries {
		_ = os.Remove(filepath.Join(root, tmpDir, e.Name())) // best effort: a leftover only takes space
	}
	return &Dir{root: root}, nil
}

// Root returns the directory the blobs are kept under.
func (d *Dir) Root() string { return d.root }

// String returns the directory, for logs.
func (d *Dir) String() string { return d.root }

func (d *Dir) path(key string) string {
	return filepath.Join(d.root, filepath.FromSlash(key))
}

// Put implements Store.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, limit int64, wantSHA256 string) (Info, error) {
	if err := checkKey(key); err != nil {
		return Info{}, err
	}
	if limit < 0 {
		return Info{}, fmt.Errorf("put blob %q: negative limit %d", key, limit)
	}
	tmp, err := os.CreateTemp(filepath.Join(d.root, tmpDir), "put-*")
	if err != nil {
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), &ctxReader{ctx: ctx, r: io.LimitReader(r, limit+1)})
	switch {
	case err != nil:
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	case n > limit:
		return Info{}, fmt.Errorf("put blob %q: %w", key, &LimitError{Limit: limit})
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if wantSHA256 != "" && sum != wantSHA256 {
		return Info{}, fmt.Errorf("put blob %q: %w: got %d bytes with sha256 %s, want %s", key, ErrDigestMismatch, n, sum, wantSHA256)
	}
	if err := tmp.Sync(); err != nil {
		return Info{}, fmt.Errorf("put blob %q: sync: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	dst := d.path(key)
	// A concurrent Delete may remove the directory, once empty, between
	// its creation and the rename: try again then.
	for attempt := 0; ; attempt++ {
		if err = os.MkdirAll(filepath.Dir(dst), 0o700); err == nil {
			if err = os.Rename(tmp.Name(), dst); err == nil {
				break
			}
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt >= 3 {
			return Info{}, fmt.Errorf("put blob %q: %w", key, err)
		}
	}
	done = true
	if err := durable.Sync(filepath.Dir(dst)); err != nil {
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	return Info{Key: key, Size: n, SHA256: sum, ModTime: fi.ModTime()}, nil
}

// Open implements Store.
func (d *Dir) Open(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := checkKey(key); err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, fmt.Errorf("open blob %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("open blob %q: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Info{}, fmt.Errorf("open blob %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close() // a directory of longer keys, not a blob
		return nil, Info{}, fmt.Errorf("open blob %q: %w", key, ErrNotFound)
	}
	return f, Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Stat implements Store.
func (d *Dir) Stat(ctx context.Context, key string) (Info, error) {
	if err := checkKey(key); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(d.path(key))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.Mode().IsRegular()) {
		return Info{}, fmt.Errorf("stat blob %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return Info{}, fmt.Errorf("stat blob %q: %w", key, err)
	}
	return Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Delete implements Store. It also removes the directories the blob
// leaves empty.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	p := d.path(key)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob %q: %w", key, err)
	}
	for dir := filepath.Dir(p); dir != d.root && strings.HasPrefix(dir, d.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty, or gone
		}
	}
	return nil
}

// List implements Store.
func (d *Dir) List(ctx context.Context, prefix string, fn func(Info) error) error {
	// Walk from the deepest directory every key with the prefix is in.
	start := path.Dir(prefix + "x")
	top := d.root
	if start != "." {
		top = filepath.Join(d.root, filepath.FromSlash(start))
	}
	err := filepath.WalkDir(top, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.root, p)
		key := filepath.ToSlash(rel)
		if e.IsDir() {
			if key == tmpDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(key, prefix) || !ValidKey(key) {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return fn(Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
	})
	if err != nil {
		return fmt.Errorf("list blobs %q: %w", prefix, err)
	}
	return nil
}

// ctxReader fails a read once ctx is done, so that a Put of a slow body
// stops when its caller gives up.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}
