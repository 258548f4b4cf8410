package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/testsvc"
)

// Variables of a copy of the test binary started by netNS.command: it
// joins the namespace, then becomes the program.
const (
	envExecNetNS = "KICI_E2E_EXEC_NETNS"
	envExecPath  = "KICI_E2E_EXEC_PATH"
)

// netNS is a network namespace a test made for an orchestrator whose
// microVM host network (bridge, TAPs, nftables) must not touch the host.
// It lives while the test holds its handle, and everything in it is gone
// when the handle is closed and its last process exited.
type netNS struct {
	handle netns.NsHandle
	client *http.Client
}

// newNetNS makes a namespace with its loopback up.
func newNetNS(t *testing.T) *netNS {
	t.Helper()
	if os.Geteuid() != 0 {
		if testsvc.RequireServices() {
			t.Fatal("network namespaces need root, and KICI_TEST_REQUIRE_SERVICES=1 requires them")
		}
		t.Skip("network namespaces need root")
	}
	var n netNS
	err := inNewThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		h, err := netns.New() // switches this thread into it
		if err != nil {
			return err
		}
		defer func() { _ = netns.Set(orig) }()
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			h.Close()
			return fmt.Errorf("bring up lo: %w", err)
		}
		n.handle = h
		return nil
	})
	if err != nil {
		t.Fatalf("make a network namespace: %v", err)
	}
	n.client = &http.Client{Transport: &http.Transport{DialContext: n.dial}}
	t.Cleanup(func() { n.handle.Close() })
	return &n
}

// path names the namespace for a process to join.
func (n *netNS) path() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(n.handle)) }

// do runs fn on a thread inside the namespace.
func (n *netNS) do(fn func() error) error {
	return inNewThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		if err := netns.Set(n.handle); err != nil {
			return err
		}
		defer func() {
			if err := netns.Set(orig); err != nil {
				panic(err) // the thread would go back to the pool in the wrong namespace
			}
		}()
		return fn()
	})
}

// dial opens a connection from inside the namespace; the socket stays
// there whatever thread uses it later.
func (n *netNS) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// command makes cmd start inside the namespace: a copy of the test binary
// joins it, then executes cmd's program.
func (n *netNS) command(cmd *exec.Cmd) *exec.Cmd {
	out := exec.Command(os.Args[0], cmd.Args[1:]...)
	out.Env = append(cmd.Env, envExecNetNS+"="+n.path(), envExecPath+"="+cmd.Path)
	out.Stdout, out.Stderr, out.Dir = cmd.Stdout, cmd.Stderr, cmd.Dir
	return out
}

// inNewThread runs fn on a goroutine locked to its thread; a thread left
// in another namespace dies with its goroutine instead of going back to
// the pool.
func inNewThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
		// Not unlocked: the thread ends with the goroutine.
	}()
	return <-errc
}

// execInNetNS is the start of TestMain: a copy of the test binary started
// by netNS.command joins the namespace and executes the program, never
// returning.
func execInNetNS() {
	ns, path := os.Getenv(envExecNetNS), os.Getenv(envExecPath)
	if ns == "" || path == "" {
		return
	}
	runtime.LockOSThread()
	fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Setns(fd, unix.CLONE_NEWNET)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: join network namespace %s: %v\n", ns, err)
		os.Exit(125)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !hasEnvPrefix(kv, envExecNetNS+"=") && !hasEnvPrefix(kv, envExecPath+"=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(path, append([]string{path}, os.Args[1:]...), env)
	fmt.Fprintf(os.Stderr, "e2e: exec %s: %v\n", path, err)
	os.Exit(126)
}

func hasEnvPrefix(kv, p string) bool { return len(kv) >= len(p) && kv[:len(p)] == p }
