package fakevm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// apiShutdownGrace bounds how long the API server finishes its last
// requests after the machine ended; then the process exits, as
// Firecracker does at once when its guest powers off. It must stay short:
// net/http's Shutdown counts a connection that sent nothing yet (a
// client's spare keep-alive connection) as busy for 5 s.
const apiShutdownGrace = 200 * time.Millisecond

// FirecrackerMain runs the fake firecracker binary with args (without the
// program name) and returns its exit code. Run with KICI_FAKE_FC_ROLE set
// by a VMM, it is that VMM's guest helper instead.
func FirecrackerMain(args []string, stdout, stderr io.Writer) int {
	if os.Getenv(envRole) == roleGuest {
		return guestHelperMain()
	}
	f, err := parseFirecrackerArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "Arguments parsing error: %v \n\nFor more information try --help.\n", err)
		return ExitArgParsing
	}
	switch {
	case f.help:
		fmt.Fprintf(stdout, "Firecracker v%s (kici fake)\n\n%s", Version, usage(firecrackerArgs))
		return ExitOK
	case f.version:
		fmt.Fprintf(stdout, "Firecracker v%s (kici fake)\n", Version)
		return ExitOK
	case f.snapshotVersion:
		fmt.Fprintln(stdout, "v1.0.0 (kici fake snapshot format)")
		return ExitOK
	case f.describeSnapshot != "":
		fmt.Fprintln(stdout, "v1.0.0 (kici fake snapshot format)")
		return ExitOK
	}
	if err := runVMM(f, stderr); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.err != nil {
				fmt.Fprintln(stderr, ee.err)
			}
			return ee.code
		}
		fmt.Fprintln(stderr, err)
		return ExitGenericError
	}
	return ExitOK
}

// exitError carries an exit code out of runVMM.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return fmt.Sprintf("exit %d: %v", e.code, e.err) }

// runVMM is the VMM process: start the guest helper while root and in the
// host's mount namespace, enter the jail, drop to the jailer's uid:gid,
// then serve the API until the machine ends.
func runVMM(f fcFlags, stderr io.Writer) error {
	jailRoot := os.Getenv(envJailRoot)
	agent := os.Getenv(envGuestAgent)
	if agent == "" {
		if exe, err := os.Executable(); err == nil {
			agent = guestAgentPath(exe)
		}
	}
	// Until the log file is open, early lines go to stderr.
	bootLog := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var booter GuestBooter
	if os.Geteuid() == 0 {
		b, err := startGuestHelper(bootLog, jailRoot, agent)
		if err != nil {
			return err
		}
		booter = b
	}
	if jailRoot != "" {
		if err := enterJail(jailRoot); err != nil {
			return err
		}
	}

	level := slog.LevelWarn
	if f.level != "" {
		level, _ = parseLevel(f.level)
	}
	var logOut io.Writer = stderr
	if f.logPath != "" {
		lf, err := openLogFile(f.logPath)
		if err != nil {
			return &exitError{ExitBadConfiguration, fmt.Errorf("Failed to open target file: %s", errnoText(err))}
		}
		defer lf.Close()
		logOut = lf
	}
	m := NewMachine(Config{
		ID: f.id, PayloadLimit: f.payloadLimit, MMDSSizeLimit: f.mmdsSizeLimit,
		Guest: booter, LogOutput: logOut, LogLevel: level,
	})
	defer m.Close()
	if hb, ok := booter.(*helperBooter); ok {
		hb.log = m.Logger()
	}
	m.Logger().Warn("Running Firecracker v"+Version+" (kici fake: no kernel is booted)", "pid", os.Getpid(), "jailed", jailRoot != "")
	if f.metricsPath != "" {
		path := f.metricsPath
		if err := m.putMetrics(metricsConfig{MetricsPath: &path}); err != nil {
			return &exitError{ExitBadConfiguration, err}
		}
	}

	doc, meta, err := readConfigFiles(f.configFile, f.metadata)
	if err != nil {
		return &exitError{ExitBadConfiguration, err}
	}
	if doc != nil {
		if err := m.ApplyConfigFile(context.Background(), doc, meta); err != nil {
			return &exitError{ExitBadConfiguration, fmt.Errorf("Building VMM configured from cmdline json failed: %v", err)}
		}
	} else if meta != nil {
		v, err := decodeAny(meta)
		if err == nil {
			err = m.putMMDS(v)
		}
		if err != nil {
			return &exitError{ExitBadConfiguration, fmt.Errorf("Failed to put the metadata: %v", err)}
		}
	}
	if f.noAPI {
		<-m.Done()
		return exitFor(m)
	}

	ln, err := listenAPI(f.apiSock)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(m.Logger().Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-m.Done():
		ctx, cancel := context.WithTimeout(context.Background(), apiShutdownGrace)
		defer cancel()
		if srv.Shutdown(ctx) != nil { // lets the call that ended the machine answer
			_ = srv.Close()
		}
		return exitFor(m)
	case err := <-served:
		return fmt.Errorf("serve the api on %q: %w", f.apiSock, err)
	}
}

func exitFor(m *Machine) error {
	if code := m.ExitCode(); code != ExitOK {
		return &exitError{code: code}
	}
	return nil
}

// enterJail chroots into root and becomes the jailer's uid:gid, for the
// whole process (Go applies chroot and set*id to every thread).
func enterJail(root string) error {
	uid, err := strconv.Atoi(os.Getenv(envJailUID))
	if err != nil {
		return fmt.Errorf("fake firecracker: %s=%q: not a uid", envJailUID, os.Getenv(envJailUID))
	}
	gid, err := strconv.Atoi(os.Getenv(envJailGID))
	if err != nil {
		return fmt.Errorf("fake firecracker: %s=%q: not a gid", envJailGID, os.Getenv(envJailGID))
	}
	if err := syscall.Chroot(root); err != nil {
		return fmt.Errorf("chroot %q: %w", root, err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return fmt.Errorf("chdir / in the jail: %w", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("drop the supplementary groups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	return nil
}

// listenAPI listens on the API socket, making its directory and removing
// a stale socket first.
func listenAPI(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("Failed to open the API socket at %s: %s", path, errnoText(err))
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("Failed to open the API socket at %s: %v", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}
