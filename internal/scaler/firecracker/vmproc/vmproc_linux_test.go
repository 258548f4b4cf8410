package vmproc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/scaler/firecracker/vmproc"
	"github.com/kici-dev/kici/internal/testsvc"
)

// requireRoot skips the test unless it runs as root, which starting a
// process in a chroot needs, or fails it under KICI_TEST_REQUIRE_SERVICES=1.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if testsvc.RequireServices() {
		t.Fatalf("not root, and %s=1 requires the chroot tests to run", testsvc.EnvRequireServices)
	}
	t.Skipf("not root: skipping the test that starts a chrooted process (set %s=1 to fail instead)", testsvc.EnvRequireServices)
}

// startProc starts the fake Firecracker as a process named name (its
// comm), chrooted into root, or not chrooted when root is "". The process
// is killed and reaped when the test ends.
func startProc(t *testing.T, name, root string) *exec.Cmd {
	t.Helper()
	dir := root
	if dir == "" {
		dir = t.TempDir()
	}
	// A hard link, not a copy: a binary written while a parallel test
	// forks could stay open for writing in that child until it execs, and
	// starting it would fail with ETXTBSY.
	if err := os.Link(fakeFirecracker, filepath.Join(dir, name)); err != nil {
		t.Fatalf("link the fake firecracker as %s (TMPDIR and the test's temp dirs must share a filesystem): %v", name, err)
	}
	cmd := exec.Command(filepath.Join(dir, name))
	if root != "" {
		// The path is looked up inside the chroot.
		cmd = &exec.Cmd{Path: "/" + name, Args: []string{name}, SysProcAttr: &syscall.SysProcAttr{Chroot: root}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// writePIDFile writes content as the jail's pid file and returns its path.
func writePIDFile(t *testing.T, jail, content string) string {
	t.Helper()
	path := vmproc.PIDFile(jail)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// jailedVM starts a confirmable Firecracker in a new jail and returns the
// process, its pid file and the jail root.
func jailedVM(t *testing.T) (*exec.Cmd, string, string) {
	t.Helper()
	jail := t.TempDir()
	cmd := startProc(t, "firecracker", jail)
	return cmd, writePIDFile(t, jail, strconv.Itoa(cmd.Process.Pid)), jail
}

// exitedUnreaped kills a child and waits until it has exited, leaving it
// an unreaped zombie.
func exitedUnreaped(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				t.Fatalf("waitid: %v", err)
			}
			return
		}
	}
}

// requireNeverKilled proves a child was never sent SIGKILL: it sends
// SIGTERM and checks that SIGTERM is what the child died of. (A SIGKILL
// sent earlier would have started its exit, and be its cause of death.)
func requireNeverKilled(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: got %v, want the process still running", err)
	}
	_ = cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("process ended with %s: want it killed by our SIGTERM, never signalled before", cmd.ProcessState)
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	tests := []struct {
		name string
		// setup returns the pid file and jail root to probe.
		setup  func(t *testing.T) (string, string)
		want   vmproc.State
		detail string
	}{
		{"confirmed", func(t *testing.T) (string, string) {
			_, pidFile, jail := jailedVM(t)
			return pidFile, jail
		}, vmproc.Confirmed, "firecracker in the jail"},
		{"wrong comm", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			cmd := startProc(t, "jailer", jail)
			return writePIDFile(t, jail, strconv.Itoa(cmd.Process.Pid)), jail
		}, vmproc.Unconfirmed, `is "jailer", not "firecracker"`},
		{"comm with parentheses", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			cmd := startProc(t, "fc) (x", jail)
			return writePIDFile(t, jail, strconv.Itoa(cmd.Process.Pid)), jail
		}, vmproc.Unconfirmed, `is "fc) (x"`},
		{"not chrooted", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			cmd := startProc(t, "firecracker", "")
			return writePIDFile(t, jail, strconv.Itoa(cmd.Process.Pid)), jail
		}, vmproc.Unconfirmed, "is not the jail root"},
		{"another jail", func(t *testing.T) (string, string) {
			other := t.TempDir()
			cmd := startProc(t, "firecracker", other)
			jail := t.TempDir()
			return writePIDFile(t, jail, strconv.Itoa(cmd.Process.Pid)), jail
		}, vmproc.Unconfirmed, "is not the jail root"},
		{"jail root missing", func(t *testing.T) (string, string) {
			_, pidFile, jail := jailedVM(t)
			return pidFile, jail + "-missing"
		}, vmproc.Unconfirmed, "jail root is unreadable"},
		{"dead and reaped", func(t *testing.T) (string, string) {
			cmd, pidFile, jail := jailedVM(t)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return pidFile, jail
		}, vmproc.Gone, "has exited"},
		{"zombie", func(t *testing.T) (string, string) {
			cmd, pidFile, jail := jailedVM(t)
			exitedUnreaped(t, cmd)
			return pidFile, jail
		}, vmproc.Gone, "not reaped"},
		{"recycled", func(t *testing.T) (string, string) {
			_, pidFile, jail := jailedVM(t)
			old := time.Now().Add(-10 * time.Minute)
			if err := os.Chtimes(pidFile, old, old); err != nil {
				t.Fatal(err)
			}
			return pidFile, jail
		}, vmproc.Gone, "recycled"},
		{"pid file missing", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			return vmproc.PIDFile(jail), jail
		}, vmproc.Gone, "no pid file"},
		{"pid 0", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			return writePIDFile(t, jail, "0\n"), jail
		}, vmproc.Gone, "no pid > 0"},
		{"pid -1", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			return writePIDFile(t, jail, "-1"), jail
		}, vmproc.Gone, "no pid > 0"},
		{"garbage", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			return writePIDFile(t, jail, "firecracker\x00\x01"), jail
		}, vmproc.Gone, "no pid > 0"},
		{"truncated", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			return writePIDFile(t, jail, ""), jail
		}, vmproc.Gone, "no pid > 0"},
		{"pid file unreadable", func(t *testing.T) (string, string) {
			jail := t.TempDir()
			if err := os.Mkdir(vmproc.PIDFile(jail), 0o755); err != nil {
				t.Fatal(err)
			}
			return vmproc.PIDFile(jail), jail
		}, vmproc.Unconfirmed, "pid file unreadable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile, jail := tc.setup(t)
			got := vmproc.Probe(pidFile, jail)
			t.Logf("Probe: %+v", got)
			if got.State != tc.want {
				t.Errorf("State: got %s, want %s (detail %q)", got.State, tc.want, got.Detail)
			}
			if !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("Detail: got %q, want it to contain %q", got.Detail, tc.detail)
			}
			if got.Running() != (tc.want != vmproc.Gone) {
				t.Errorf("Running: got %v, want %v", got.Running(), tc.want != vmproc.Gone)
			}
		})
	}
}

func TestProbeStarted(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	before := time.Now()
	_, pidFile, jail := jailedVM(t)
	after := time.Now()
	got := vmproc.Probe(pidFile, jail)
	// The boot time has whole-second precision.
	if got.Started.Before(before.Add(-2*time.Second)) || got.Started.After(after.Add(2*time.Second)) {
		t.Errorf("Started: got %s, want between %s and %s", got.Started, before, after)
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	requireRoot(t)

	t.Run("confirmed", func(t *testing.T) {
		t.Parallel()
		cmd, pidFile, jail := jailedVM(t)
		id, err := vmproc.Kill(t.Context(), pidFile, jail, 10*time.Second)
		if err != nil {
			t.Fatalf("Kill: got %v, want nil", err)
		}
		if id.State != vmproc.Confirmed || id.PID != cmd.Process.Pid {
			t.Errorf("Kill acted on %+v, want the confirmed pid %d", id, cmd.Process.Pid)
		}
		// Kill waited for the exit: before it is reaped, the process is
		// already a zombie.
		if got := vmproc.Probe(pidFile, jail); got.State != vmproc.Gone {
			t.Errorf("Probe after Kill: got %+v, want gone", got)
		}
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("process ended with %s, want SIGKILL", cmd.ProcessState)
		}
		// Again, once it is gone: nothing to do.
		if _, err := vmproc.Kill(t.Context(), pidFile, jail, time.Second); err != nil {
			t.Errorf("Kill of a gone process: got %v, want nil", err)
		}
	})

	refused := []struct {
		name  string
		start func(t *testing.T, jail string) *exec.Cmd
	}{
		{"wrong comm", func(t *testing.T, jail string) *exec.Cmd { return startProc(t, "jailer", jail) }},
		{"not chrooted", func(t *testing.T, jail string) *exec.Cmd { return startProc(t, "firecracker", "") }},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jail := t.TempDir()
			cmd := tc.start(t, jail)
			pidFile := writePIDFile(t, jail, strconv.Itoa(cmd.Process.Pid))
			id, err := vmproc.Kill(t.Context(), pidFile, jail, time.Second)
			if !errors.Is(err, vmproc.ErrNotConfirmed) {
				t.Fatalf("Kill: got %v, want ErrNotConfirmed", err)
			}
			if id.State != vmproc.Unconfirmed {
				t.Errorf("State: got %s, want unconfirmed", id.State)
			}
			requireNeverKilled(t, cmd)
		})
	}

	t.Run("recycled pid is not signalled", func(t *testing.T) {
		t.Parallel()
		cmd, pidFile, jail := jailedVM(t)
		old := time.Now().Add(-10 * time.Minute)
		if err := os.Chtimes(pidFile, old, old); err != nil {
			t.Fatal(err)
		}
		id, err := vmproc.Kill(t.Context(), pidFile, jail, time.Second)
		if err != nil || id.State != vmproc.Gone {
			t.Fatalf("Kill: got %+v, %v, want gone and nil", id, err)
		}
		requireNeverKilled(t, cmd)
	})

	for _, content := range []string{"0", "-1", "", "garbage"} {
		t.Run("pid file "+strconv.Quote(content), func(t *testing.T) {
			t.Parallel()
			jail := t.TempDir()
			id, err := vmproc.Kill(t.Context(), writePIDFile(t, jail, content), jail, time.Second)
			if err != nil || id.State != vmproc.Gone {
				t.Errorf("Kill: got %+v, %v, want gone and nil", id, err)
			}
		})
	}
}

func TestWaitGone(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()

	starts := []struct {
		name  string
		start func(t *testing.T, jail string) *exec.Cmd
	}{
		{"confirmed", func(t *testing.T, jail string) *exec.Cmd { return startProc(t, "firecracker", jail) }},
		{"unconfirmed", func(t *testing.T, jail string) *exec.Cmd { return startProc(t, "firecracker", "") }},
	}
	for _, tc := range starts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jail := t.TempDir()
			cmd := tc.start(t, jail)
			pidFile := writePIDFile(t, jail, strconv.Itoa(cmd.Process.Pid))

			err := vmproc.WaitGone(cancelled, pidFile, jail)
			if !errors.Is(err, vmproc.ErrStillRunning) || !errors.Is(err, context.Canceled) {
				t.Fatalf("WaitGone with a cancelled ctx: got %v, want ErrStillRunning and context.Canceled", err)
			}

			// Cancelled while it waits.
			waiting, stop := context.WithCancelCause(t.Context())
			interrupted := make(chan error, 1)
			go func() { interrupted <- vmproc.WaitGone(waiting, pidFile, jail) }()
			cause := errors.New("destroy gave up")
			stop(cause)
			if err := <-interrupted; !errors.Is(err, vmproc.ErrStillRunning) || !errors.Is(err, cause) {
				t.Fatalf("WaitGone cancelled while waiting: got %v, want ErrStillRunning and the cause", err)
			}

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- vmproc.WaitGone(ctx, pidFile, jail) }()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Errorf("WaitGone: got %v, want nil once the process exited", err)
			}
		})
	}

	t.Run("gone", func(t *testing.T) {
		t.Parallel()
		jail := t.TempDir()
		if err := vmproc.WaitGone(cancelled, writePIDFile(t, jail, "0"), jail); err != nil {
			t.Errorf("WaitGone: got %v, want nil", err)
		}
	})

	t.Run("pid file unreadable", func(t *testing.T) {
		t.Parallel()
		jail := t.TempDir()
		if err := os.Mkdir(vmproc.PIDFile(jail), 0o755); err != nil {
			t.Fatal(err)
		}
		err := vmproc.WaitGone(t.Context(), vmproc.PIDFile(jail), jail)
		if err == nil || errors.Is(err, vmproc.ErrStillRunning) {
			t.Errorf("WaitGone: got %v, want an error about the pid file", err)
		}
	})
}
