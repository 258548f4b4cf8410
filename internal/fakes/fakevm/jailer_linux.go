package fakevm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Device nodes the jailer makes in the jail (src/jailer/src/env.rs).
var jailDevices = []struct {
	path         string
	major, minor uint32
	optional     bool
}{
	{"/dev/net/tun", 10, 200, false},
	{"/dev/kvm", 10, 232, false},
	{"/dev/urandom", 1, 9, true},
}

// jailFolders are made (0700) and chowned to the VMM's uid:gid.
var jailFolders = []string{"/", "/dev", "/dev/net", "/run"}

// JailerMain runs the fake jailer with args (without the program name) and
// returns its exit code: 0 once firecracker runs (or, without --new-pid-ns
// and --daemonize, it never returns: the process becomes firecracker).
func JailerMain(args []string, stdout, stderr io.Writer) int {
	startUS, startCPUUS := clockUS(unix.CLOCK_MONOTONIC), clockUS(unix.CLOCK_PROCESS_CPUTIME_ID)
	c, err := ParseJailerArgs(args)
	switch {
	case errors.Is(err, errJailerHelp):
		fmt.Fprintf(stdout, "Jailer v%s (kici fake)\n\n%s\nAny arguments after the -- separator will be supplied to the jailed binary.\n", Version, usage(jailerArgs))
		return 0
	case errors.Is(err, errJailerVersion):
		fmt.Fprintf(stdout, "Jailer v%s (kici fake)\n", Version)
		return 0
	case err != nil:
		fmt.Fprintln(stderr, err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	if err := runJailer(c, guestAgentPath(exe), startUS, startCPUUS, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// runJailer builds the jail and starts (or becomes) firecracker in it.
func runJailer(c JailerConfig, agent string, startUS, startCPUUS uint64, stdout io.Writer) error {
	root := c.ChrootDir()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("Failed to create directory %s: %s", root, errnoText(err))
	}
	jailExec, err := copyExecFile(c, root)
	if err != nil {
		return err
	}
	if err := setResourceLimits(c); err != nil {
		return err
	}
	for _, f := range jailFolders {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("Failed to create directory %s: %s", f, errnoText(err))
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return fmt.Errorf("Failed to change permissions on %s: %s", f, errnoText(err))
		}
		if err := os.Lchown(p, int(c.UID), int(c.GID)); err != nil {
			return fmt.Errorf("Failed to change owner for %s: %s", f, errnoText(err))
		}
	}
	for _, d := range jailDevices {
		if err := mknodOwned(filepath.Join(root, d.path), d.major, d.minor, c.UID, c.GID); err != nil {
			if d.optional {
				fmt.Fprintf(stdout, "Warning! Could not create %s device inside jailer: %s.\n", d.path, errnoText(err))
				continue
			}
			return fmt.Errorf("Failed to create %s via mknod inside the jail: %s", d.path, errnoText(err))
		}
	}

	// Namespaces are per thread: join the netns on the thread that will
	// start (or become) firecracker, and never give that thread back.
	runtime.LockOSThread()
	if c.NetNS != "" {
		if err := joinNetNS(c.NetNS); err != nil {
			return err
		}
	}

	argv := []string{"/" + c.ExecName,
		"--id", c.ID,
		"--start-time-us", strconv.FormatUint(startUS, 10),
		"--start-time-cpu-us", strconv.FormatUint(clockUS(unix.CLOCK_PROCESS_CPUTIME_ID), 10),
		"--parent-cpu-time-us", strconv.FormatUint(clockUS(unix.CLOCK_PROCESS_CPUTIME_ID)-startCPUUS, 10),
	}
	argv = append(argv, c.ExtraArgs...)
	env := []string{
		envJailRoot + "=" + root,
		envJailUID + "=" + strconv.FormatUint(uint64(c.UID), 10),
		envJailGID + "=" + strconv.FormatUint(uint64(c.GID), 10),
		envGuestAgent + "=" + agent,
	}
	if !c.NewPIDNS && !c.Daemonize {
		if err := writePIDFile(c.PIDFile(), os.Getpid()); err != nil {
			return err
		}
		err := syscall.Exec(jailExec, argv, env)
		return fmt.Errorf("Failed to exec into Firecracker: %s", errnoText(err))
	}
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	sys := &syscall.SysProcAttr{}
	if c.Daemonize {
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("Failed to open /dev/null: %s", errnoText(err))
		}
		defer null.Close()
		files = []*os.File{null, null, null}
		sys.Setsid = true
	} else if sid, _ := unix.Getsid(0); sid == os.Getpid() {
		// A session leader's exit would SIGHUP firecracker: give it a
		// session of its own, as the real jailer does.
		sys.Setsid = true
	}
	if c.NewPIDNS {
		sys.Cloneflags = syscall.CLONE_NEWPID
	}
	p, err := os.StartProcess(jailExec, argv, &os.ProcAttr{Env: env, Files: files, Sys: sys})
	if err != nil {
		return fmt.Errorf("Failed to exec into Firecracker: %s", errnoText(err))
	}
	pid := p.Pid
	_ = p.Release()
	return writePIDFile(c.PIDFile(), pid)
}

// copyExecFile copies the exec file into the jail root (a copy, never a
// hard link, so VMMs share no memory), owned by the VMM's uid:gid, and
// returns its host path.
func copyExecFile(c JailerConfig, root string) (string, error) {
	dst := filepath.Join(root, c.ExecName)
	src, err := os.Open(c.ExecFile)
	if err != nil {
		return "", fmt.Errorf("Failed to open %s: %s", c.ExecFile, errnoText(err))
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return "", fmt.Errorf("Failed to get metadata for %s: %s", c.ExecFile, errnoText(err))
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, fi.Mode().Perm())
	if err != nil {
		return "", fmt.Errorf("Failed to open %s: %s", dst, errnoText(err))
	}
	defer out.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(out.Fd()), &st); err != nil {
		return "", fmt.Errorf("Failed to get metadata for %s: %s", dst, errnoText(err))
	}
	if st.Nlink > 1 {
		return "", fmt.Errorf("Failed to copy %s to %s: the destination is a hard link", c.ExecFile, dst)
	}
	if err := out.Chown(int(c.UID), int(c.GID)); err != nil {
		return "", fmt.Errorf("Failed to change owner for %s: %s", dst, errnoText(err))
	}
	if err := out.Chmod(fi.Mode().Perm()); err != nil {
		return "", fmt.Errorf("Failed to change permissions on %s: %s", dst, errnoText(err))
	}
	if _, err := io.Copy(out, src); err != nil {
		return "", fmt.Errorf("Failed to copy %s to %s: %v", c.ExecFile, dst, err)
	}
	if err := out.Close(); err != nil {
		return "", fmt.Errorf("Failed to copy %s to %s: %v", c.ExecFile, dst, err)
	}
	return dst, nil
}

// setResourceLimits applies --resource-limit (no-file 2048 by default).
func setResourceLimits(c JailerConfig) error {
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: c.NoFile, Max: c.NoFile}); err != nil {
		return fmt.Errorf("Failed to set limit for resource: no-file: %s", errnoText(err))
	}
	if c.FileSize > 0 {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: c.FileSize, Max: c.FileSize}); err != nil {
			return fmt.Errorf("Failed to set limit for resource: fsize: %s", errnoText(err))
		}
	}
	return nil
}

// mknodOwned makes a character device node 0600 owned by uid:gid.
func mknodOwned(path string, major, minor, uid, gid uint32) error {
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(major, minor))); err != nil {
		return err
	}
	return os.Lchown(path, int(uid), int(gid))
}

// joinNetNS moves the calling thread into the network namespace of the
// handle path.
func joinNetNS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("Failed to open file %s: %s", path, errnoText(err))
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("Failed to join network namespace: netns: %s", errnoText(err))
	}
	return nil
}

// writePIDFile writes pid to path, which must not exist yet.
func writePIDFile(path string, pid int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("Failed to open file %s: %s", path, errnoText(err))
	}
	if _, err := f.WriteString(strconv.Itoa(pid)); err != nil {
		f.Close()
		return fmt.Errorf("Failed to write to %s: %s", path, errnoText(err))
	}
	return f.Close()
}

// clockUS reads a clock in microseconds.
func clockUS(clock int32) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return uint64(time.Now().UnixMicro())
	}
	return uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3
}
