package source

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// stripTopDir copies a tar.gz from src to dst without its first path
// component, and without pax global headers. It refuses entries whose
// names or link targets would leave the tree.
func stripTopDir(dst io.Writer, src io.Reader) error {
	gr, err := gzip.NewReader(src)
	if err != nil {
		return fmt.Errorf("read tarball: %w", err)
	}
	tr := tar.NewReader(gr)
	gw := gzip.NewWriter(dst)
	tw := tar.NewWriter(gw)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read tarball: %w", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, ok := stripFirst(hdr.Name)
		if !ok {
			return fmt.Errorf("read tarball: entry %q leaves the tree", hdr.Name)
		}
		if name == "" {
			continue // the top directory itself
		}
		hdr.Name = name
		if hdr.Typeflag == tar.TypeLink {
			if hdr.Linkname, ok = stripFirst(hdr.Linkname); !ok || hdr.Linkname == "" {
				return fmt.Errorf("read tarball: hard link %q leaves the tree", hdr.Name)
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("copy %q: %w", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	if err := gw.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

// stripFirst drops the first component of a relative tar path, keeping a
// directory's trailing slash; ok is false for a path that is absolute or
// climbs out with "..".
func stripFirst(name string) (string, bool) {
	if strings.HasPrefix(name, "/") {
		return "", false
	}
	clean := path.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	_, rest, found := strings.Cut(clean, "/")
	if !found || rest == "" {
		return "", true
	}
	if strings.HasSuffix(name, "/") {
		rest += "/"
	}
	return rest, true
}
