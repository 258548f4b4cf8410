package fakevm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// guestBootTimeout bounds a boot handshake whose ctx has no deadline.
const guestBootTimeout = 30 * time.Second

// helperBooter boots the guest through the guest helper process. It boots
// one guest: a VMM process runs one VM.
type helperBooter struct {
	conn *net.UnixConn
	log  *slog.Logger

	mu   sync.Mutex
	used bool
}

var _ GuestBooter = (*helperBooter)(nil)

// startGuestHelper starts the guest helper: this binary again (through
// /proc/self/exe, so it must run before the chroot), as root, in a new
// network namespace, its stdout and stderr on the VMM's stdout (the serial
// console), connected by a socketpair. It dies with the VMM: it is in the
// VMM's PID namespace when the jailer made one (the VMM is its init), and
// it has a parent-death signal otherwise.
func startGuestHelper(log *slog.Logger, jailRoot, agent string) (*helperBooter, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("make the guest helper socketpair: %w", err)
	}
	vmmEnd := os.NewFile(uintptr(fds[0]), "guest-helper")
	helperEnd := os.NewFile(uintptr(fds[1]), "vmm")
	defer helperEnd.Close()
	defer vmmEnd.Close()
	env := []string{envRole + "=" + roleGuest, envJailRoot + "=" + jailRoot, envGuestAgent + "=" + agent}
	if os.Getpid() == 1 {
		env = append(env, envHelperPIDNS+"=1")
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{guestComm},
		Env:        env,
		Stdout:     os.Stdout,
		Stderr:     os.Stdout,
		ExtraFiles: []*os.File{helperEnd},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWNET,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the guest helper: %w", err)
	}
	go func() {
		err := cmd.Wait()
		log.Info("the guest helper exited", "err", err)
	}()
	c, err := net.FileConn(vmmEnd)
	if err != nil {
		return nil, fmt.Errorf("open the guest helper socket: %w", err)
	}
	return &helperBooter{conn: c.(*net.UnixConn), log: log}, nil
}

// BootGuest has the helper make the guest's network, takes the guest TAPs
// and the MMDS listener from it, starts relaying frames between each host
// TAP and its guest TAP and serving MMDS, and then has the helper start the
// guest agent.
func (b *helperBooter) BootGuest(ctx context.Context, spec GuestSpec) (Guest, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used {
		return nil, errors.New("fake firecracker: this vmm already booted its guest")
	}
	b.used = true
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(guestBootTimeout)
	}
	_ = b.conn.SetDeadline(deadline)
	defer b.conn.SetDeadline(time.Time{})

	bm := bootMsg{IP: spec.IP}
	for _, n := range spec.NICs {
		bm.NICs = append(bm.NICs, bootNIC{MAC: n.GuestMAC, MTU: n.MTU})
	}
	if spec.MMDS != nil {
		bm.MMDSAddr = spec.MMDSAddr.String()
	}
	if err := sendMsg(b.conn, helperMsg{Op: opBoot, Boot: &bm}); err != nil {
		return nil, err
	}
	msg, fds, err := recvMsg(b.conn)
	if err != nil {
		return nil, fmt.Errorf("wait for the guest's network: %w", err)
	}
	want := len(spec.NICs)
	if spec.MMDS != nil {
		want++
	}
	switch {
	case msg.Op == opError:
		closeFDs(fds)
		return nil, fmt.Errorf("guest network: %s", msg.Error)
	case msg.Op != opReady || len(fds) != want:
		closeFDs(fds)
		return nil, fmt.Errorf("guest helper answered %q with %d fds, want %q with %d", msg.Op, len(fds), opReady, want)
	}
	for i, n := range spec.NICs {
		if err := unix.SetNonblock(fds[i], true); err != nil {
			closeFDs(fds[i:])
			return nil, fmt.Errorf("guest tap eth%d: %w", i, err)
		}
		guestTap := os.NewFile(uintptr(fds[i]), fmt.Sprintf("guest-eth%d", i))
		go func() { _ = relayFrames(guestTap, n.Tap) }()
		go func() { _ = relayFrames(n.Tap, guestTap) }()
	}
	if spec.MMDS != nil {
		f := os.NewFile(uintptr(fds[len(spec.NICs)]), "mmds-listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("mmds listener: %w", err)
		}
		go func() { _ = spec.MMDS.Serve(ln) }()
	}

	g := &helperGuest{conn: b.conn, log: b.log, done: make(chan struct{})}
	if err := sendMsg(b.conn, helperMsg{Op: opStart}); err != nil {
		return nil, err
	}
	msg, fds, err = recvMsg(b.conn)
	closeFDs(fds)
	switch {
	case err != nil:
		return nil, fmt.Errorf("wait for the guest agent to start: %w", err)
	case msg.Op == opStarted:
		b.log.Info("the guest agent started", "guest_pid", msg.PID)
	case msg.Op == opExited:
		g.powerOff(msg.Status)
		return g, nil
	default:
		return nil, fmt.Errorf("start the guest agent: %s%s", msg.Op, msg.Error)
	}
	// The boot deadline must not bound the guest's life.
	if err := b.conn.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clear the boot deadline: %w", err)
	}
	go g.watch()
	return g, nil
}

// helperGuest is a guest run by the guest helper.
type helperGuest struct {
	conn *net.UnixConn
	log  *slog.Logger

	sendMu sync.Mutex
	done   chan struct{}
	once   sync.Once
}

var _ Guest = (*helperGuest)(nil)

func (g *helperGuest) Pause() error      { return g.send(opPause) }
func (g *helperGuest) Resume() error     { return g.send(opResume) }
func (g *helperGuest) CtrlAltDel() error { return g.send(opCtrlAltDel) }

func (g *helperGuest) Done() <-chan struct{} { return g.done }

func (g *helperGuest) send(op string) error {
	g.sendMu.Lock()
	defer g.sendMu.Unlock()
	return sendMsg(g.conn, helperMsg{Op: op})
}

// watch waits for the helper to report the power-off (or to die).
func (g *helperGuest) watch() {
	for {
		msg, fds, err := recvMsg(g.conn)
		closeFDs(fds)
		if err != nil {
			g.powerOff("the guest helper is gone: " + err.Error())
			return
		}
		if msg.Op == opExited {
			g.powerOff(msg.Status)
			return
		}
	}
}

func (g *helperGuest) powerOff(status string) {
	g.once.Do(func() {
		g.log.Info("the guest helper reported the power-off", "status", status)
		close(g.done)
	})
}
