package bundle

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
	"time"
)

// Writer writes a bundle. Add entries, then Close; the first error sticks
// and every later call returns it.
type Writer struct {
	gz    *gzip.Writer
	tw    *tar.Writer
	c     counter
	files []File
	err   error
}

// NewWriter returns a Writer of a bundle within lim onto w. It compresses
// for speed over size (gzip level 1): bundles are mostly build output
// that is either already compressed or quick to send.
func NewWriter(w io.Writer, lim Limits) *Writer {
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level never fails
	return &Writer{gz: gz, tw: tar.NewWriter(gz), c: counter{lim: lim}}
}

// Files returns the regular files written so far, in order.
func (w *Writer) Files() []File { return w.files }

// Stats returns what was written so far.
func (w *Writer) Stats() Stats { return w.c.st }

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// AddFile writes the regular file at src (never following a symbolic
// link) as entry name. A file that changes size while it is read fails.
func (w *Writer) AddFile(name, src string) error {
	if w.err != nil {
		return w.err
	}
	name, err := CleanName(name)
	if err != nil {
		return w.fail(err)
	}
	before, err := os.Lstat(src)
	if err != nil {
		return w.fail(err)
	}
	if !before.Mode().IsRegular() {
		return w.fail(fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, src))
	}
	f, err := os.Open(src)
	if err != nil {
		return w.fail(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return w.fail(err)
	}
	if !os.SameFile(before, fi) {
		return w.fail(fmt.Errorf("%s was replaced while it was archived", src))
	}
	if err := w.c.entry(); err != nil {
		return w.fail(err)
	}
	if err := w.c.file(fi.Size()); err != nil {
		return w.fail(err)
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: int64(fi.Mode().Perm()),
		ModTime: fi.ModTime().Truncate(time.Second), Format: tar.FormatPAX}
	if err := w.tw.WriteHeader(h); err != nil {
		return w.fail(err)
	}
	n, err := io.CopyN(w.tw, f, fi.Size())
	if errors.Is(err, io.EOF) {
		return w.fail(fmt.Errorf("%s shrank from %d to %d bytes while it was archived", src, fi.Size(), n))
	}
	if err != nil {
		return w.fail(fmt.Errorf("archive %s: %w", src, err))
	}
	w.files = append(w.files, File{Path: name, Size: fi.Size()})
	return nil
}

// AddDir writes a directory entry.
func (w *Writer) AddDir(name string, mode fs.FileMode, mtime time.Time) error {
	if w.err != nil {
		return w.err
	}
	name, err := CleanName(name)
	if err != nil {
		return w.fail(err)
	}
	if err := w.c.entry(); err != nil {
		return w.fail(err)
	}
	h := &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(mode.Perm()), ModTime: mtime.Truncate(time.Second), Format: tar.FormatPAX}
	return w.fail2(w.tw.WriteHeader(h))
}

// AddSymlink writes a symbolic link entry; its target must stay inside
// the tree.
func (w *Writer) AddSymlink(name, target string) error {
	if w.err != nil {
		return w.err
	}
	name, err := CleanName(name)
	if err != nil {
		return w.fail(err)
	}
	if err := checkLink(name, target); err != nil {
		return w.fail(err)
	}
	if err := w.c.entry(); err != nil {
		return w.fail(err)
	}
	h := &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: filepath.ToSlash(target), Mode: 0o777, Format: tar.FormatPAX}
	return w.fail2(w.tw.WriteHeader(h))
}

// fail2 records err, if any.
func (w *Writer) fail2(err error) error {
	if err != nil {
		return w.fail(err)
	}
	return nil
}

// TreeStats say what AddTree left out.
type TreeStats struct {
	// Links are the symbolic links skipped: every one when links are not
	// wanted, else those pointing out of the tree.
	Links int
	// Other are the entries of other kinds skipped (sockets, FIFOs,
	// devices).
	Other int
}

// AddTree writes the directory dir and everything below it under the
// entry prefix ("" for the top of the bundle). Symbolic links are kept
// when links is true and they point inside dir (the others are
// skipped); none is ever followed.
func (w *Writer) AddTree(prefix, dir string, links bool) (TreeStats, error) {
	var st TreeStats
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := path.Join(prefix, filepath.ToSlash(rel))
		switch {
		case e.IsDir():
			if name == "." || name == "" {
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			return w.AddDir(name, fi.Mode(), fi.ModTime())
		case e.Type().IsRegular():
			return w.AddFile(name, p)
		case e.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !links || checkLink(filepath.ToSlash(rel), target) != nil {
				st.Links++
				return nil
			}
			return w.AddSymlink(name, target)
		}
		st.Other++
		return nil
	})
	if err != nil {
		return st, w.fail(err)
	}
	return st, nil
}

// Close ends the bundle. It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.tw.Close(); err != nil {
		return w.fail(err)
	}
	return w.fail2(w.gz.Close())
}
