package overlay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// mib is one MiB in bytes.
	mib = 1 << 20
	// magicOffset is where the ext4 superblock (at 1024) keeps s_magic
	// (at 0x38 inside it).
	magicOffset = 1024 + 0x38
	// ext4Magic is s_magic, stored little-endian.
	ext4Magic = 0xEF53
	// outputTailBytes is how much of a tool's output an error carries.
	outputTailBytes = 2048
	// waitDelay bounds the wait for a killed tool's output pipe to close.
	waitDelay = 5 * time.Second
)

// Valid reports whether path is a usable template for sizeMiB: a regular
// file (not a symlink) of exactly sizeMiB MiB that carries the ext4
// superblock magic.
func Valid(path string, sizeMiB int) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(sizeMiB)*mib {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [2]byte
	if _, err := f.ReadAt(magic[:], magicOffset); err != nil {
		return false
	}
	return binary.LittleEndian.Uint16(magic[:]) == ext4Magic
}

// build formats the template of size into a temp file and renames it into
// place, unless a valid one is already there (another process, or an
// earlier build, made it since the caller looked). The temp file is
// removed on any failure.
func (t *Templates) build(ctx context.Context, size int) error {
	path := TemplatePath(t.cfg.Dir, size)
	if Valid(path, size) {
		return nil
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return &MissingToolError{Tool: "mkfs.ext4", Err: err}
	}
	if err := os.MkdirAll(t.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("create overlay template dir: %w", err)
	}
	t.removeStaleTemps(path)

	tmp, err := createTemp(path, size)
	if err != nil {
		return fmt.Errorf("create overlay template %q: %w", path, err)
	}
	installed := false
	defer func() {
		if !installed {
			_ = os.Remove(tmp)
		}
	}()

	t.builds.Add(1)
	start := time.Now()
	if err := runTool(ctx, t.cfg.mkfsTimeout(), mkfs, "-qF", tmp); err != nil {
		return fmt.Errorf("format overlay template %q: %w", path, err)
	}
	if !Valid(tmp, size) {
		return fmt.Errorf("format overlay template %q: mkfs.ext4 succeeded but %q has no ext4 superblock of %d MiB", path, tmp, size)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("format overlay template %q: %w", path, err)
	}
	// A directory in the template's place would make the rename fail.
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("replace overlay template %q: %w", path, err)
		}
	}
	// The directory is not fsynced: a rename lost in a crash costs only a
	// rebuild.
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("install overlay template %q: %w", path, err)
	}
	installed = true
	t.logger.Info("overlay template built", "path", path, "size_mib", size, "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// tempPrefix starts the name of every temp file a build of path makes.
func tempPrefix(path string) string { return path + ".tmp-" }

// createTemp creates a sparse file of size MiB next to path, named
// <path>.tmp-<pid>-<8 hex>, and returns its name.
func createTemp(path string, size int) (string, error) {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:]) // crypto/rand.Read never fails
	name := tempPrefix(path) + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(suffix[:])
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	err = f.Truncate(int64(size) * mib)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// syncFile flushes a formatted file before it is renamed into place, so a
// crash cannot leave a template whose superblock is there but whose other
// metadata is not. mkfs.ext4 normally flushes already, making this cheap.
func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeStaleTemps removes the temp files of builds of path that died
// (killed, or on a host that crashed): mkfs writes a temp file throughout
// a build, which its timeout bounds, so one untouched for long enough has
// no builder left. Failures are only logged: a leftover costs disk space,
// not correctness, since a temp file is never read as a template.
func (t *Templates) removeStaleTemps(path string) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return
	}
	prefix := filepath.Base(tempPrefix(path))
	maxAge := max(minStaleTempAge, 2*t.cfg.mkfsTimeout())
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < maxAge {
			continue
		}
		name := filepath.Join(filepath.Dir(path), e.Name())
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.logger.Warn("stale overlay template temp file not removed", "path", name, "error", err)
			continue
		}
		t.logger.Info("stale overlay template temp file removed", "path", name, "modified", fi.ModTime())
	}
}

// runTool runs a host program, bounded by timeout and ctx. Its error
// carries the tail of the program's output, and the timeout or ctx's cause
// when either ended the run.
func runTool(ctx context.Context, timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s timed out after %s", filepath.Base(name), timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = waitDelay
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	if tail := outputTail(out); tail != "" {
		return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, tail)
	}
	return fmt.Errorf("%s: %w", filepath.Base(name), err)
}

// outputTail is the last outputTailBytes of a program's output, trimmed,
// starting at a line boundary when one is near.
func outputTail(out []byte) string {
	out = bytes.TrimSpace(out)
	if len(out) > outputTailBytes {
		out = out[len(out)-outputTailBytes:]
		if i := bytes.IndexByte(out, '\n'); i >= 0 && i < len(out)-1 {
			out = out[i+1:]
		}
	}
	return string(out)
}
