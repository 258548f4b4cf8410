package bundle

import (
	"archive/tar"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// entries calls fn with each entry of the bundle r, its name cleaned,
// after checking it against lim and the kinds allowed (directories,
// regular files, and symbolic links inside the tree when links is true).
// fn reads a regular file's content from the tar reader.
func entries(r io.Reader, lim Limits, links bool, fn func(h *tar.Header, name string, tr *tar.Reader) error) (Stats, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return Stats{}, fmt.Errorf("read gzip: %w", err)
	}
	defer gz.Close()
	c := counter{lim: lim}
	// Every decompressed byte is read (the content of skipped entries, and
	// whatever follows the tar's end, to check the gzip trailer): bound
	// them all, or a few compressed megabytes of zeros could keep the
	// orchestrator inflating for hours.
	budget := &boundedReader{r: gz, left: expandedLimit(lim)}
	tr := tar.NewReader(budget)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// Read the gzip trailer, so that its checksum is verified.
			if _, err := io.Copy(io.Discard, budget); err != nil {
				return c.st, fmt.Errorf("read gzip: %w", err)
			}
			return c.st, nil
		}
		if err != nil {
			var le *LimitError
			if errors.As(err, &le) {
				return c.st, le
			}
			return c.st, fmt.Errorf("read tar: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := CleanName(h.Name)
		if err != nil {
			return c.st, err
		}
		if name == "." {
			continue
		}
		if err := c.entry(); err != nil {
			return c.st, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA: some writers still use it
			if err := c.file(h.Size); err != nil {
				return c.st, err
			}
		case tar.TypeSymlink:
			if !links {
				return c.st, fmt.Errorf("%w: entry %q is a symbolic link, which this bundle may not hold", ErrUnsafe, h.Name)
			}
			if err := checkLink(name, h.Linkname); err != nil {
				return c.st, err
			}
		default:
			return c.st, fmt.Errorf("%w: entry %q has unsupported type %q", ErrUnsafe, h.Name, h.Typeflag)
		}
		if err := fn(h, name, tr); err != nil {
			return c.st, err
		}
	}
}

// List reads the whole bundle r, checking every entry as Extract would,
// and returns its regular files in order. links allows symbolic links
// that stay inside the tree.
func List(r io.Reader, lim Limits, links bool) ([]File, Stats, error) {
	var files []File
	st, err := entries(r, lim, links, func(h *tar.Header, name string, _ *tar.Reader) error {
		if h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeRegA { //nolint:staticcheck // see entries
			files = append(files, File{Path: name, Size: h.Size})
		}
		return nil
	})
	return files, st, err
}

// Target is where Extract writes an entry: below the directory Dir, at
// Rel (slash-separated, relative to Dir; "." for Dir itself).
type Target struct {
	Dir string
	Rel string
}

// ExtractOptions say where and what Extract writes.
type ExtractOptions struct {
	// Place maps an entry's cleaned name to where it goes; ok false skips
	// the entry. Nil writes every entry below the directory Extract was
	// given.
	Place func(name string) (t Target, ok bool)
	// Links allows symbolic links that stay inside the tree (relative to
	// the directory they are written in).
	Links bool
}

// Extract writes the entries of the bundle r below dir (or where
// opts.Place says), each directory made as needed. A regular file is
// written to a temporary file beside it and renamed over what was there,
// so a reader of the tree never sees half a file, and two extractions
// into the same directory do not break each other. Every write goes
// through an os.Root of its target directory, so no entry, and no
// symbolic link already in the tree, can make it write outside. It
// refuses (with ErrUnsafe) what List refuses, and an entry that would
// replace a directory with a file or a link.
func Extract(r io.Reader, dir string, lim Limits, opts ExtractOptions) (Stats, error) {
	x := &extractor{roots: map[string]*os.Root{}, links: opts.Links}
	defer x.close()
	place := opts.Place
	if place == nil {
		place = func(name string) (Target, bool) { return Target{Dir: dir, Rel: name}, true }
	}
	return entries(r, lim, opts.Links, func(h *tar.Header, name string, tr *tar.Reader) error {
		t, ok := place(name)
		if !ok {
			return nil
		}
		rel, err := CleanName(t.Rel)
		if err != nil {
			return err
		}
		root, err := x.root(t.Dir)
		if err != nil {
			return err
		}
		local := filepath.FromSlash(rel)
		switch h.Typeflag {
		case tar.TypeDir:
			if rel == "." {
				return nil
			}
			return root.MkdirAll(local, dirMode(h))
		case tar.TypeSymlink:
			// The link must stay inside the directory it is written in
			// too, not only inside the bundle.
			if err := checkLink(rel, h.Linkname); err != nil {
				return err
			}
			if err := x.parent(root, local); err != nil {
				return err
			}
			if err := replaceable(root, local); err != nil {
				return err
			}
			_ = root.Remove(local)
			return root.Symlink(filepath.FromSlash(h.Linkname), local)
		default:
			if rel == "." {
				return fmt.Errorf("%w: file entry %q would replace its target directory %s", ErrUnsafe, h.Name, t.Dir)
			}
			return x.file(root, local, h, tr)
		}
	})
}

func dirMode(h *tar.Header) fs.FileMode { return fs.FileMode(h.Mode)&0o777 | 0o700 }

type extractor struct {
	roots map[string]*os.Root
	links bool
}

func (x *extractor) close() {
	for _, r := range x.roots {
		r.Close()
	}
}

// root opens (once) the directory dir, creating it when missing.
func (x *extractor) root(dir string) (*os.Root, error) {
	if r, ok := x.roots[dir]; ok {
		return r, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	x.roots[dir] = r
	return r, nil
}

// parent makes the directory local is in.
func (x *extractor) parent(root *os.Root, local string) error {
	if d := filepath.Dir(local); d != "." {
		return root.MkdirAll(d, 0o755)
	}
	return nil
}

// replaceable refuses to put a file or link where a directory is.
func replaceable(root *os.Root, local string) error {
	fi, err := root.Lstat(local)
	if err == nil && fi.IsDir() {
		return fmt.Errorf("%w: entry %q would replace a directory", ErrUnsafe, filepath.ToSlash(local))
	}
	return nil
}

func (x *extractor) file(root *os.Root, local string, h *tar.Header, r io.Reader) error {
	if err := x.parent(root, local); err != nil {
		return err
	}
	if err := replaceable(root, local); err != nil {
		return err
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	tmp := filepath.Join(filepath.Dir(local), "."+path.Base(filepath.ToSlash(local))+".kici-"+hex.EncodeToString(suffix))
	perm := fs.FileMode(h.Mode)&0o777 | 0o600
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, h.Size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !h.ModTime.IsZero() {
		err = root.Chtimes(tmp, h.ModTime, h.ModTime)
	}
	if err == nil {
		err = root.Rename(tmp, local)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("write %q: %w", strings.TrimPrefix(filepath.ToSlash(local), "./"), err)
	}
	return nil
}

// expandedLimit is how many decompressed bytes a bundle within lim may
// take: its content, plus for each entry its headers (PAX records
// included, which tar bounds at 1 MiB) and padding, plus the end blocks.
func expandedLimit(lim Limits) int64 {
	const perEntry = 16 << 10
	entries := int64(lim.MaxEntries)
	if lim.MaxEntries <= 0 || lim.MaxBytes <= 0 {
		return 1 << 62 // unbounded bundles stay so
	}
	return lim.MaxBytes + (entries+2)*perEntry + 2<<20
}

// boundedReader fails with a *LimitError once more than left bytes are
// read from r.
type boundedReader struct {
	r    io.Reader
	left int64
	lim  int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.lim == 0 {
		b.lim = b.left
	}
	if b.left <= 0 {
		// One byte more tells a bundle that ends exactly at the limit
		// from one that goes on.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, &LimitError{What: "expanded", Limit: b.lim}
		}
		return b.r.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
