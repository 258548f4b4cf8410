package overlay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/scaler/firecracker/overlay"
	"github.com/kici-dev/kici/internal/testsvc"
)

const mib = 1 << 20

// requireTools skips the test when mkfs.ext4 or cp is missing, or fails it
// under KICI_TEST_REQUIRE_SERVICES=1.
func requireTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"mkfs.ext4", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testsvc.RequireServices() {
				t.Fatalf("%s is not installed, and %s=1 requires it", tool, testsvc.EnvRequireServices)
			}
			t.Skipf("%s is not installed: skipping (install e2fsprogs, or set %s=1 to fail instead)", tool, testsvc.EnvRequireServices)
		}
	}
}

// newTemplates returns Templates of cfg, in a fresh template dir when
// cfg.Dir is empty, and its dir.
func newTemplates(t *testing.T, cfg overlay.Config) (*overlay.Templates, string) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = overlay.TemplateDir(t.TempDir())
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	tpl, err := overlay.New(logger, cfg)
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	return tpl, cfg.Dir
}

// dirNames lists the names in dir (none if it does not exist).
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// allocated is the disk space a file takes.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// fsck checks path with e2fsck, when it is installed.
func fsck(t *testing.T, path string) {
	t.Helper()
	e2fsck, err := exec.LookPath("e2fsck")
	if err != nil {
		t.Logf("e2fsck not installed: %s checked by its superblock magic only", path)
		return
	}
	if out, err := exec.Command(e2fsck, "-fn", path).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn %s: got %v, want a clean filesystem\n%s", path, err, out)
	}
}

// mkfs formats a new file of size MiB at path, the way a builder does.
func mkfs(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(size)*mib); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-qF", path).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v\n%s", path, err, out)
	}
}

func TestCopyConcurrentFirstUsesBuildOnce(t *testing.T) {
	t.Parallel()
	requireTools(t)
	const size = 64
	tpl, dir := newTemplates(t, overlay.Config{})
	dests := t.TempDir()

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = tpl.Copy(t.Context(), size, filepath.Join(dests, fmt.Sprintf("overlay-%d.ext4", i)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Copy %d: got %v, want nil", i, err)
		}
	}
	if got := tpl.Builds(); got != 1 {
		t.Errorf("Builds: got %d, want 1 (concurrent first uses share one mkfs)", got)
	}
	names := dirNames(t, dests)
	if len(names) != len(errs) {
		t.Errorf("drives: got %q, want %d", names, len(errs))
	}
	for _, name := range names {
		dest := filepath.Join(dests, name)
		if !overlay.Valid(dest, size) {
			t.Errorf("Valid(%s, %d): got false, want true", name, size)
		}
		if got, limit := allocated(t, dest), int64(size*mib/8); got > limit {
			t.Errorf("%s allocates %d bytes: want a sparse copy of at most %d of its %d", name, got, limit, size*mib)
		}
	}
	fsck(t, filepath.Join(dests, "overlay-0.ext4"))
	if diff := cmp.Diff([]string{"overlay-64mib.ext4"}, dirNames(t, dir)); diff != "" {
		t.Errorf("template dir (-want +got):\n%s", diff)
	}

	// Later spawns copy without building.
	if err := tpl.Copy(t.Context(), size, filepath.Join(dests, "later.ext4")); err != nil {
		t.Fatalf("Copy: got %v, want nil", err)
	}
	if got := tpl.Builds(); got != 1 {
		t.Errorf("Builds after a later Copy: got %d, want 1", got)
	}
}

func TestEnsureRebuildsInvalidTemplate(t *testing.T) {
	t.Parallel()
	requireTools(t)
	const size = 8
	tests := []struct {
		name string
		// spoil puts something that is not a valid template at path.
		spoil func(t *testing.T, path string)
	}{
		{"zeroed magic", func(t *testing.T, path string) {
			mkfs(t, path, size)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0, 0}, 1024+0x38); err != nil {
				t.Fatal(err)
			}
		}},
		{"too large", func(t *testing.T, path string) {
			mkfs(t, path, size)
			if err := os.Truncate(path, (size+1)*mib); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, path string) {
			mkfs(t, path, size)
			if err := os.Truncate(path, 4096); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"zeroed, right size", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, size*mib); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, path string) {
			if err := os.MkdirAll(filepath.Join(path, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink to a valid file", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere.ext4")
			mkfs(t, target, size)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tpl, dir := newTemplates(t, overlay.Config{})
			path := overlay.TemplatePath(dir, size)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, path)
			if overlay.Valid(path, size) {
				t.Fatalf("Valid before Ensure: got true, want false")
			}
			got, err := tpl.Ensure(t.Context(), size)
			if err != nil {
				t.Fatalf("Ensure: got %v, want nil", err)
			}
			if got != path {
				t.Errorf("Ensure: got %q, want %q", got, path)
			}
			if !overlay.Valid(path, size) {
				t.Errorf("Valid after Ensure: got false, want true")
			}
			if n := tpl.Builds(); n != 1 {
				t.Errorf("Builds: got %d, want 1", n)
			}
			fsck(t, path)
		})
	}
}

func TestEnsureKeepsValidTemplate(t *testing.T) {
	t.Parallel()
	requireTools(t)
	first, dir := newTemplates(t, overlay.Config{})
	path, err := first.Ensure(t.Context(), 8)
	if err != nil {
		t.Fatalf("Ensure: got %v, want nil", err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	// Another process (another Templates on the dir) finds it on disk.
	second, _ := newTemplates(t, overlay.Config{Dir: dir})
	if _, err := second.Ensure(t.Context(), 8); err != nil {
		t.Fatalf("Ensure: got %v, want nil", err)
	}
	if n := second.Builds(); n != 0 {
		t.Errorf("Builds: got %d, want 0", n)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("template was replaced: want the valid one kept")
	}
}

func TestTempFileIsNotATemplate(t *testing.T) {
	t.Parallel()
	requireTools(t)
	const size = 8
	tpl, dir := newTemplates(t, overlay.Config{})
	path := overlay.TemplatePath(dir, size)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A builder killed right after mkfs left a complete temp file, and one
	// killed hours ago left another; a third is a concurrent builder's.
	fresh := path + ".tmp-4242-0badf00d"
	stale := path + ".tmp-4241-deadbeef"
	mkfs(t, fresh, size)
	mkfs(t, stale, size)
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}

	got, err := tpl.Ensure(t.Context(), size)
	if err != nil {
		t.Fatalf("Ensure: got %v, want nil", err)
	}
	if got != path {
		t.Errorf("Ensure: got %q, want %q", got, path)
	}
	if n := tpl.Builds(); n != 1 {
		t.Errorf("Builds: got %d, want 1 (a temp file is no template)", n)
	}
	want := []string{filepath.Base(path), filepath.Base(fresh)}
	if diff := cmp.Diff(want, dirNames(t, dir)); diff != "" {
		t.Errorf("template dir: want the stale temp file removed and the fresh one kept (-want +got):\n%s", diff)
	}
}

func TestTwoProcessesBuildOneSize(t *testing.T) {
	t.Parallel()
	requireTools(t)
	const size = 16
	a, dir := newTemplates(t, overlay.Config{})
	b, _ := newTemplates(t, overlay.Config{Dir: dir})

	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		tpl := a
		if i%2 == 1 {
			tpl = b
		}
		wg.Go(func() { _, errs[i] = tpl.Ensure(t.Context(), size) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Ensure %d: got %v, want nil", i, err)
		}
	}
	if n := a.Builds() + b.Builds(); n < 1 || n > 2 {
		t.Errorf("Builds: got %d in all, want 1 or 2 (at most one per process)", n)
	}
	if !overlay.Valid(overlay.TemplatePath(dir, size), size) {
		t.Errorf("Valid: got false, want true")
	}
	if diff := cmp.Diff([]string{"overlay-16mib.ext4"}, dirNames(t, dir)); diff != "" {
		t.Errorf("template dir (-want +got):\n%s", diff)
	}
}

func TestPrebuild(t *testing.T) {
	t.Parallel()
	requireTools(t)
	tpl, dir := newTemplates(t, overlay.Config{})
	if err := tpl.Prebuild(t.Context(), []int{16, 8, 16}); err != nil {
		t.Fatalf("Prebuild: got %v, want nil", err)
	}
	if n := tpl.Builds(); n != 2 {
		t.Errorf("Builds: got %d, want 2", n)
	}
	if diff := cmp.Diff([]string{"overlay-16mib.ext4", "overlay-8mib.ext4"}, dirNames(t, dir)); diff != "" {
		t.Errorf("template dir (-want +got):\n%s", diff)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := tpl.Prebuild(ctx, []int{32}); !errors.Is(err, context.Canceled) {
		t.Errorf("Prebuild with a cancelled ctx: got %v, want context.Canceled", err)
	}
}

func TestEnsureCallerGivesUp(t *testing.T) {
	t.Parallel()
	requireTools(t)
	tpl, dir := newTemplates(t, overlay.Config{})
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("spawn deadline")
	cancel(cause)
	if _, err := tpl.Ensure(ctx, 8); !errors.Is(err, cause) {
		t.Errorf("Ensure with a cancelled ctx: got %v, want its cause", err)
	}
	// The abandoned build does not get in the way of the next caller.
	if _, err := tpl.Ensure(t.Context(), 8); err != nil {
		t.Fatalf("Ensure: got %v, want nil", err)
	}
	if !overlay.Valid(overlay.TemplatePath(dir, 8), 8) {
		t.Errorf("Valid: got false, want true")
	}
}

func TestBuildFailureRemovesTempFile(t *testing.T) {
	t.Parallel()
	requireTools(t)
	tpl, dir := newTemplates(t, overlay.Config{MkfsTimeout: time.Nanosecond})
	_, err := tpl.Ensure(t.Context(), 8)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Ensure: got %v, want a timeout", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("template dir after a failed build: got %q, want it empty", names)
	}
}

func TestCopyFailure(t *testing.T) {
	t.Parallel()
	requireTools(t)
	tests := []struct {
		name string
		cfg  overlay.Config
		// dest returns the drive path; it may put a stale file there.
		dest func(t *testing.T) string
		want string
	}{
		{
			name: "no such dir",
			dest: func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing", "overlay.ext4") },
			want: "No such file or directory",
		},
		{
			name: "timeout removes the file",
			cfg:  overlay.Config{CopyTimeout: time.Nanosecond},
			dest: func(t *testing.T) string {
				dest := filepath.Join(t.TempDir(), "overlay.ext4")
				if err := os.WriteFile(dest, []byte("partial"), 0o644); err != nil {
					t.Fatal(err)
				}
				return dest
			},
			want: "timed out",
		},
		{
			name: "directory at dest",
			dest: func(t *testing.T) string { return t.TempDir() },
			want: "cannot overwrite directory",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tpl, _ := newTemplates(t, tc.cfg)
			dest := tc.dest(t)
			fi, _ := os.Lstat(dest)
			err := tpl.Copy(t.Context(), 8, dest)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Copy: got %v, want an error containing %q", err, tc.want)
			}
			if fi != nil && fi.IsDir() {
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("the directory at dest: got %v, want it kept", err)
				}
				return
			}
			if _, err := os.Lstat(dest); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("dest after a failed copy: got %v, want it removed", err)
			}
		})
	}
}

// TestMissingTool runs the templates with a $PATH that holds only some of
// the tools; t.Setenv keeps it out of the parallel tests.
func TestMissingTool(t *testing.T) {
	requireTools(t)
	ensure := func(ctx context.Context, tpl *overlay.Templates, _ string) error {
		_, err := tpl.Ensure(ctx, 8)
		return err
	}
	copyDrive := func(ctx context.Context, tpl *overlay.Templates, dest string) error {
		return tpl.Copy(ctx, 8, dest)
	}
	prebuild := func(ctx context.Context, tpl *overlay.Templates, _ string) error {
		return tpl.Prebuild(ctx, []int{8, 16})
	}
	tests := []struct {
		name string
		// tools are the programs on $PATH.
		tools []string
		call  func(ctx context.Context, tpl *overlay.Templates, dest string) error
		want  string
	}{
		{"ensure without mkfs.ext4", nil, ensure, "mkfs.ext4"},
		{"copy without mkfs.ext4", []string{"cp"}, copyDrive, "mkfs.ext4"},
		{"copy without cp", []string{"mkfs.ext4"}, copyDrive, "cp"},
		{"prebuild without mkfs.ext4", []string{"cp"}, prebuild, "mkfs.ext4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			for _, tool := range tc.tools {
				target, err := exec.LookPath(tool)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, filepath.Join(bin, tool)); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", bin)
			tpl, dir := newTemplates(t, overlay.Config{})
			err := tc.call(t.Context(), tpl, filepath.Join(t.TempDir(), "overlay.ext4"))
			missing, ok := errors.AsType[*overlay.MissingToolError](err)
			if !ok {
				t.Fatalf("got %v, want a *MissingToolError", err)
			}
			if missing.Tool != tc.want {
				t.Errorf("Tool: got %q, want %q", missing.Tool, tc.want)
			}
			if !errors.Is(err, exec.ErrNotFound) {
				t.Errorf("got %v, want it to wrap exec.ErrNotFound", err)
			}
			if n := strings.Count(err.Error(), "missing host tool"); n != 1 {
				t.Errorf("got %q, want the missing tool named once (Prebuild stops at the first)", err)
			}
			if n := tpl.Builds(); n != 0 {
				t.Errorf("Builds: got %d, want 0", n)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("template dir: got %q, want it empty", names)
			}
		})
	}
}

// TestBuildReportsMkfsFailure runs a stand-in mkfs.ext4 from $PATH; t.Setenv
// keeps it out of the parallel tests.
func TestBuildReportsMkfsFailure(t *testing.T) {
	requireTools(t)
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"exit status and output tail", "echo 'mke2fs: Device size reported to be zero' >&2; exit 1", "exit status 1: mke2fs: Device size reported to be zero"},
		{"success without a filesystem", "exit 0", "no ext4 superblock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			if err := os.WriteFile(filepath.Join(bin, "mkfs.ext4"), []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
			tpl, dir := newTemplates(t, overlay.Config{})
			_, err := tpl.Ensure(t.Context(), 8)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ensure: got %v, want an error containing %q", err, tc.want)
			}
			if n := tpl.Builds(); n != 1 {
				t.Errorf("Builds: got %d, want 1", n)
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("template dir after a failed build: got %q, want it empty", names)
			}
		})
	}
}
