package overlay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// MissingToolError means a host program the templates need (mkfs.ext4 or
// cp) is not installed or not on $PATH. Retrying will not help until an
// operator installs it, so the Firecracker backend reports it as a
// deterministic spawn failure.
type MissingToolError struct {
	// Tool is the program's name: "mkfs.ext4" or "cp".
	Tool string
	// Err is the lookup's error; it wraps exec.ErrNotFound when the
	// program is not on $PATH.
	Err error
}

func (e *MissingToolError) Error() string {
	return fmt.Sprintf("missing host tool %q: %v", e.Tool, e.Err)
}

func (e *MissingToolError) Unwrap() error { return e.Err }

// errNoWaiters cancels a build that every waiter gave up on.
var errNoWaiters = errors.New("every caller waiting for the overlay template build gave up")

// DirName is the name of the template directory inside
// <chrootBaseDir>/firecracker. Its leading dot keeps it out of chroot scans.
const DirName = ".overlay-templates"

const (
	// DefaultMkfsTimeout bounds one template's mkfs.ext4. A build runs once
	// per size per host, mostly off a spawn's critical path, and its fsync
	// may wait behind a disk backlog, so it gets far more room than a
	// per-spawn step.
	DefaultMkfsTimeout = 300 * time.Second
	// DefaultCopyTimeout bounds one per-spawn copy of a template.
	DefaultCopyTimeout = 30 * time.Second
	// MaxSizeMiB is the largest drive size a template can have (16 TiB).
	MaxSizeMiB = 1 << 24
)

// minStaleTempAge is the least time a build's temp file must have gone
// unwritten before a later build removes it as a dead builder's leftover;
// the real limit is the larger of this and twice the mkfs timeout.
const minStaleTempAge = time.Hour

// Config configures a Templates.
type Config struct {
	// Dir is the template directory, normally TemplateDir(chrootBaseDir).
	// Required, absolute. It is created (mode 0755, with its parents) by
	// the first build.
	Dir string
	// MkfsTimeout bounds one mkfs.ext4 run. Zero means DefaultMkfsTimeout.
	MkfsTimeout time.Duration
	// CopyTimeout bounds one copy of a template to a drive. Zero means
	// DefaultCopyTimeout.
	CopyTimeout time.Duration
}

// Validate reports the first field that is not usable.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("overlay config: Dir is required")
	case !filepath.IsAbs(c.Dir):
		return fmt.Errorf("overlay config: Dir %q is not an absolute path", c.Dir)
	case c.MkfsTimeout < 0:
		return fmt.Errorf("overlay config: MkfsTimeout %s is negative", c.MkfsTimeout)
	case c.CopyTimeout < 0:
		return fmt.Errorf("overlay config: CopyTimeout %s is negative", c.CopyTimeout)
	}
	return nil
}

func (c Config) mkfsTimeout() time.Duration {
	if c.MkfsTimeout == 0 {
		return DefaultMkfsTimeout
	}
	return c.MkfsTimeout
}

func (c Config) copyTimeout() time.Duration {
	if c.CopyTimeout == 0 {
		return DefaultCopyTimeout
	}
	return c.CopyTimeout
}

// TemplateDir is the template directory for a jailer chroot base dir. It is
// shared by every scaler that uses that chroot base dir.
func TemplateDir(chrootBaseDir string) string {
	return filepath.Join(chrootBaseDir, "firecracker", DirName)
}

// TemplatePath is where the template for a drive of sizeMiB MiB lives in
// dir.
func TemplatePath(dir string, sizeMiB int) string {
	return filepath.Join(dir, fmt.Sprintf("overlay-%dmib.ext4", sizeMiB))
}

// Templates builds and hands out the overlay templates of one directory.
// It is safe for concurrent use.
type Templates struct {
	logger *slog.Logger
	cfg    Config

	mu sync.Mutex
	// inflight holds the running build of each size, guarded by mu.
	inflight map[int]*build

	builds atomic.Int64
}

// build is one size's template build, shared by every caller waiting for
// it.
type build struct {
	// done is closed once err is set.
	done chan struct{}
	err  error
	// waiters counts the callers still waiting, guarded by Templates.mu;
	// when the last one gives up, cancel stops the build.
	waiters int
	cancel  context.CancelCauseFunc
}

// New returns the Templates of cfg.Dir. Nothing is built until Ensure,
// Copy or Prebuild asks for a size.
func New(logger *slog.Logger, cfg Config) (*Templates, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Templates{
		logger:   logger.With("overlay_template_dir", cfg.Dir),
		cfg:      cfg,
		inflight: make(map[int]*build),
	}, nil
}

// Builds reports how many times t has run mkfs.ext4, successfully or not.
// A size whose valid template was already on disk costs no build.
func (t *Templates) Builds() int64 { return t.builds.Load() }

// Ensure returns the path of a valid template for sizeMiB, building it
// first if it is missing or not valid. Concurrent callers for one size
// share one build. When ctx ends, Ensure returns at once with its cause;
// the build goes on for the other callers still waiting, and is cancelled
// (its temp file removed) once none is left.
func (t *Templates) Ensure(ctx context.Context, sizeMiB int) (string, error) {
	if err := checkSize(sizeMiB); err != nil {
		return "", err
	}
	path := TemplatePath(t.cfg.Dir, sizeMiB)
	if Valid(path, sizeMiB) {
		return path, nil
	}
	b := t.join(ctx, sizeMiB)
	select {
	case <-b.done:
		if b.err != nil {
			return "", b.err
		}
		return path, nil
	case <-ctx.Done():
		t.leave(sizeMiB, b)
		return "", fmt.Errorf("wait for overlay template %q: %w", path, context.Cause(ctx))
	}
}

// Copy creates the overlay drive dest, of sizeMiB MiB, as a sparse copy
// (a reflink where the filesystem can) of the size's template, building
// the template first if needed. A file already at dest is replaced. On
// failure no file is left at dest.
func (t *Templates) Copy(ctx context.Context, sizeMiB int, dest string) error {
	cp, err := exec.LookPath("cp")
	if err != nil {
		return &MissingToolError{Tool: "cp", Err: err}
	}
	path, err := t.Ensure(ctx, sizeMiB)
	if err != nil {
		return err
	}
	// -T: a directory at dest is an error, not a place to copy into.
	err = runTool(ctx, t.cfg.copyTimeout(), cp, "--reflink=auto", "--sparse=always", "-T", path, dest)
	if err != nil {
		return errors.Join(fmt.Errorf("copy overlay template %q to %q: %w", path, dest, err), removePartial(dest))
	}
	return nil
}

// Prebuild makes sure the template of each size is there, one size after
// the other (formatting is disk-bound; parallel builds would only compete).
// It returns when all are done or ctx ends, with the joined errors of the
// sizes that failed. A missing tool stops it at once: every other size
// would fail the same way.
func (t *Templates) Prebuild(ctx context.Context, sizesMiB []int) error {
	var errs []error
	for _, size := range slices.Compact(slices.Sorted(slices.Values(sizesMiB))) {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("prebuild overlay templates: %w", context.Cause(ctx)))
			break
		}
		if _, err := t.Ensure(ctx, size); err != nil {
			errs = append(errs, err)
			if _, ok := errors.AsType[*MissingToolError](err); ok {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// join returns the running build of size, starting one if there is none,
// and counts the caller as its waiter.
func (t *Templates) join(ctx context.Context, size int) *build {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.inflight[size]
	if b == nil {
		// The build belongs to all its waiters, not to the first one: it
		// keeps ctx's values but not its cancellation.
		bctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
		b = &build{done: make(chan struct{}), cancel: cancel}
		t.inflight[size] = b
		go t.run(bctx, size, b)
	}
	b.waiters++
	return b
}

// leave drops a waiter that gave up; the last one cancels the build, and
// the next caller starts a fresh one.
func (t *Templates) leave(size int, b *build) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b.waiters--
	if b.waiters == 0 {
		b.cancel(errNoWaiters)
		if t.inflight[size] == b {
			delete(t.inflight, size)
		}
	}
}

func (t *Templates) run(ctx context.Context, size int, b *build) {
	err := t.build(ctx, size)
	b.cancel(nil)
	t.mu.Lock()
	if t.inflight[size] == b {
		delete(t.inflight, size)
	}
	t.mu.Unlock()
	b.err = err
	close(b.done)
}

func checkSize(sizeMiB int) error {
	if sizeMiB <= 0 || sizeMiB > MaxSizeMiB {
		return fmt.Errorf("overlay template size %d MiB is out of range 1..%d", sizeMiB, MaxSizeMiB)
	}
	return nil
}

// removePartial removes what a failed copy left at dest. Only a regular
// file is removed: cp -T creates nothing else there.
func removePartial(dest string) error {
	fi, err := os.Lstat(dest)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if err := os.Remove(dest); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove partial overlay drive: %w", err)
	}
	return nil
}
