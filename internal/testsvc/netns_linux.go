package testsvc

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// envInNetNS marks the copy of a test binary that MainInNetNS started in a
// network namespace of its own; envNoNetNS carries why it could not.
const (
	envInNetNS = "KICI_TEST_IN_NETNS"
	envNoNetNS = "KICI_TEST_NO_NETNS"
)

// MainInNetNS is a TestMain for packages whose tests change the network:
// bridges, TAPs, addresses, nftables tables. It runs the test binary again
// in a new network namespace (a child process made with CLONE_NEWNET, with
// its loopback up), so that nothing the tests create reaches the host's
// network, and everything they create dies with the namespace when the
// child exits, even after a crash. It exits with the child's status.
//
// Without the privilege to make a namespace (not root), the tests run
// here; NetNS then skips them, or fails them under
// KICI_TEST_REQUIRE_SERVICES=1.
func MainInNetNS(m *testing.M) {
	if os.Getenv(envInNetNS) == "1" {
		if err := loopbackUp(); err != nil {
			fmt.Fprintf(os.Stderr, "testsvc: bring up lo in the test's network namespace: %v\n", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	if os.Geteuid() != 0 {
		os.Setenv(envNoNetNS, "creating a network namespace needs root")
		os.Exit(m.Run())
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envInNetNS+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET,
		// The child must not outlive a test binary killed on timeout.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		os.Setenv(envNoNetNS, "start the test binary in a new network namespace: "+err.Error())
		os.Exit(m.Run())
	}
	os.Exit(0)
}

// NetNS skips t (or fails it under KICI_TEST_REQUIRE_SERVICES=1) unless
// the test binary runs in the network namespace MainInNetNS made for it.
func NetNS(t testing.TB) {
	t.Helper()
	if os.Getenv(envInNetNS) == "1" {
		return
	}
	why := os.Getenv(envNoNetNS)
	if why == "" {
		why = "the package's TestMain is not testsvc.MainInNetNS"
	}
	if RequireServices() {
		t.Fatalf("no network namespace for this test (%s), and %s=1 requires one", why, EnvRequireServices)
	}
	t.Skipf("no network namespace for this test (%s); set %s=1 to fail instead", why, EnvRequireServices)
}

// loopbackUp sets IFF_UP on lo, which a new network namespace has down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	req, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, req); err != nil {
		return err
	}
	req.SetUint16(req.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, req)
}
