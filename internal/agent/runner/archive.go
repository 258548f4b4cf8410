package runner

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxArchiveEntries bounds the entries of a source archive.
const MaxArchiveEntries = 1 << 20

// ErrUnsafeArchive is wrapped by every refusal of an archive entry that
// would write outside the checkout, through a link, or past the size limit.
var ErrUnsafeArchive = errors.New("unsafe archive")

// extractStats says what an extraction wrote.
type extractStats struct {
	entries int
	bytes   int64
}

// extractTarGz extracts the tar.gz r into the existing directory dir. It
// refuses (with ErrUnsafeArchive) absolute names, names with "..", symlinks
// whose target is absolute or leaves dir, hard links to anything but a
// regular file inside dir, entries below a symlink, more than maxBytes of
// file content and more than MaxArchiveEntries entries. Device nodes and
// FIFOs are refused; pax global headers are skipped. Every write goes
// through an os.Root, so nothing can leave dir even if a check were wrong.
func extractTarGz(r io.Reader, dir string, maxBytes int64) (extractStats, error) {
	var st extractStats
	gz, err := gzip.NewReader(r)
	if err != nil {
		return st, fmt.Errorf("read gzip: %w", err)
	}
	defer gz.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return st, err
	}
	defer root.Close()
	x := extractor{root: root, safeDirs: map[string]bool{".": true}}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("read tar: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if st.entries++; st.entries > MaxArchiveEntries {
			return st, fmt.Errorf("%w: more than %d entries", ErrUnsafeArchive, MaxArchiveEntries)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return st, err
		}
		if name == "." {
			continue
		}
		if err := x.checkParents(name); err != nil {
			return st, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = x.mkdir(name)
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA: old archives still use it
			if h.Size < 0 || st.bytes+h.Size > maxBytes {
				return st, fmt.Errorf("%w: content exceeds the limit of %s", ErrUnsafeArchive, formatBytes(maxBytes))
			}
			st.bytes += h.Size
			err = x.file(name, h, tr)
		case tar.TypeSymlink:
			err = x.symlink(name, h.Linkname)
		case tar.TypeLink:
			err = x.hardlink(name, h.Linkname)
		default:
			return st, fmt.Errorf("%w: entry %q has unsupported type %q", ErrUnsafeArchive, h.Name, h.Typeflag)
		}
		if err != nil {
			return st, err
		}
	}
}

// entryName turns an archive name into a local path, or refuses it.
func entryName(name string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if clean == "." {
		return ".", nil
	}
	local := filepath.FromSlash(clean)
	if strings.HasPrefix(name, "/") || !filepath.IsLocal(local) {
		return "", fmt.Errorf("%w: entry %q leaves the checkout", ErrUnsafeArchive, name)
	}
	return local, nil
}

type extractor struct {
	root *os.Root
	// safeDirs are directories known to be real directories, not symlinks.
	safeDirs map[string]bool
}

// checkParents refuses an entry if any directory above it is a symlink, so
// that no entry is written through a link (a link to "." or to a
// subdirectory could otherwise make a later link's target escape).
// Missing parents are fine: they are created as directories.
func (x *extractor) checkParents(name string) error {
	dir := filepath.Dir(name)
	var walked string
	for part := range strings.SplitSeq(dir, string(filepath.Separator)) {
		walked = filepath.Join(walked, part)
		if x.safeDirs[walked] {
			continue
		}
		fi, err := x.root.Lstat(walked)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: entry %q is below the symlink %q", ErrUnsafeArchive, name, walked)
		case !fi.IsDir():
			return fmt.Errorf("%w: entry %q is below the file %q", ErrUnsafeArchive, name, walked)
		}
		x.safeDirs[walked] = true
	}
	return nil
}

func (x *extractor) mkdir(name string) error {
	if err := x.root.MkdirAll(name, 0o755); err != nil {
		return err
	}
	x.safeDirs[name] = true
	return nil
}

// prepare creates name's parent directories and removes an earlier entry
// of the same name (a later entry replaces it, as tar does), but never a
// directory.
func (x *extractor) prepare(name string) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := x.mkdir(dir); err != nil {
			return err
		}
	}
	fi, err := x.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%w: entry %q replaces a directory", ErrUnsafeArchive, name)
	}
	return x.root.Remove(name)
}

func (x *extractor) file(name string, h *tar.Header, r io.Reader) error {
	if err := x.prepare(name); err != nil {
		return err
	}
	perm := fs.FileMode(h.Mode)&0o777 | 0o600
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, h.Size); err != nil {
		f.Close()
		return fmt.Errorf("write %q: %w", name, err)
	}
	return f.Close()
}

func (x *extractor) symlink(name, target string) error {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) ||
		!filepath.IsLocal(filepath.Join(filepath.Dir(name), filepath.FromSlash(target))) {
		return fmt.Errorf("%w: symlink %q points outside the checkout (%q)", ErrUnsafeArchive, name, target)
	}
	if err := x.prepare(name); err != nil {
		return err
	}
	return x.root.Symlink(filepath.FromSlash(target), name)
}

func (x *extractor) hardlink(name, target string) error {
	old, err := entryName(target)
	if err != nil || old == "." {
		return fmt.Errorf("%w: hard link %q points outside the checkout (%q)", ErrUnsafeArchive, name, target)
	}
	if err := x.checkParents(old); err != nil {
		return err
	}
	fi, err := x.root.Lstat(old)
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: hard link %q must point to a regular file extracted before it (%q)", ErrUnsafeArchive, name, target)
	}
	if err := x.prepare(name); err != nil {
		return err
	}
	return x.root.Link(old, name)
}
