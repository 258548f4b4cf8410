package fakevm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Environment of the guest helper, set by the VMM when it starts it.
const (
	// envRole set to roleGuest makes the firecracker binary the helper.
	envRole   = "KICI_FAKE_FC_ROLE"
	roleGuest = "guest-helper"
	// envHelperPIDNS is "1" when the helper shares a PID namespace of its
	// own with the VMM (its init), so that kill(-1) reaches exactly the
	// guest's processes.
	envHelperPIDNS = "KICI_FAKE_FC_PIDNS"
)

// helperFD is the helper's end of the socketpair (its first ExtraFile).
const helperFD = 3

// guestComm is the helper's process name.
const guestComm = "fc-guest"

// ctrlAltDelGrace is how long the guest's processes have between SIGTERM
// and SIGKILL after SendCtrlAltDel.
const ctrlAltDelGrace = 3 * time.Second

// guestPath is the PATH of the guest agent.
const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// guestHelper is the fake guest's "kernel and init": a process the VMM
// starts (as root, before it chroots) in a network namespace of its own.
// At boot it makes the guest's network (lo, the TAPs eth0... with their
// MACs, the ip= address and default route, the MMDS address on lo and a
// listener on its port 80) and hands the TAP and listener fds to the VMM;
// then it starts the guest agent and reaps the guest's processes (it is
// their subreaper), reporting the agent's exit as the guest's power-off.
type guestHelper struct {
	conn     *net.UnixConn
	serial   io.Writer // the VMM's stdout: the guest's serial console
	jailRoot string    // the host path of the jail root; "" when unjailed
	agent    string    // the guest agent binary
	ownPIDNS bool
	mmdsAddr string

	agentPID atomic.Int64 // 0 until started; -1 after it exited
	termTime *time.Timer
}

// guestHelperMain runs the helper; it returns the process's exit code.
func guestHelperMain() int {
	// The binary's init locked main.main to the main thread, so this names
	// the process (its thread group leader), not some other thread.
	_ = setComm(guestComm)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stdout, "fake guest: become the subreaper: %v\n", err)
	}
	f := os.NewFile(helperFD, "vmm")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stdout, "fake guest: open the vmm socket: %v\n", err)
		return 1
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		fmt.Fprintf(os.Stdout, "fake guest: fd %d is not a unix socket\n", helperFD)
		return 1
	}
	h := &guestHelper{
		conn: uc, serial: os.Stdout,
		jailRoot: os.Getenv(envJailRoot), agent: os.Getenv(envGuestAgent),
		ownPIDNS: os.Getenv(envHelperPIDNS) == "1",
	}
	return h.run()
}

// run serves the VMM's requests until the VMM closes its end.
func (h *guestHelper) run() int {
	sigchld := make(chan os.Signal, 16)
	signal.Notify(sigchld, syscall.SIGCHLD)
	type recv struct {
		msg helperMsg
		fds []int
		err error
	}
	msgs := make(chan recv)
	go func() {
		for {
			m, fds, err := recvMsg(h.conn)
			msgs <- recv{m, fds, err}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-sigchld:
			h.reap()
		case r := <-msgs:
			if r.err != nil {
				// The VMM is gone: so is the machine.
				h.signalGuest(syscall.SIGKILL)
				return 0
			}
			closeFDs(r.fds)
			h.handle(r.msg)
		}
	}
}

func (h *guestHelper) handle(m helperMsg) {
	switch m.Op {
	case opBoot:
		if m.Boot == nil {
			h.reply(helperMsg{Op: opError, Error: "boot without a description"})
			return
		}
		fds, err := h.setupNetwork(*m.Boot)
		if err != nil {
			fmt.Fprintf(h.serial, "fake guest: %v\n", err)
			closeFDs(fds)
			h.reply(helperMsg{Op: opError, Error: err.Error()})
			return
		}
		h.reply(helperMsg{Op: opReady}, fds...)
		closeFDs(fds) // the VMM holds them now
	case opStart:
		pid, err := h.startAgent()
		if err != nil {
			// As a kernel that finds no init: say so on the console and
			// power off.
			fmt.Fprintf(h.serial, "fake guest: %v\nKernel panic - not syncing: No working init found.\n", err)
			h.agentPID.Store(-1)
			h.reply(helperMsg{Op: opExited, Status: "no init: " + err.Error()})
			return
		}
		h.agentPID.Store(int64(pid))
		h.reply(helperMsg{Op: opStarted, PID: pid})
	case opPause:
		h.signalGuest(syscall.SIGSTOP)
	case opResume:
		h.signalGuest(syscall.SIGCONT)
	case opCtrlAltDel:
		h.signalGuest(syscall.SIGCONT)
		h.signalGuest(syscall.SIGTERM)
		if h.termTime == nil {
			h.termTime = time.AfterFunc(ctrlAltDelGrace, func() { h.signalGuest(syscall.SIGKILL) })
		}
	default:
		h.reply(helperMsg{Op: opError, Error: fmt.Sprintf("unknown operation %q", m.Op)})
	}
}

func (h *guestHelper) reply(m helperMsg, fds ...int) {
	if err := sendMsg(h.conn, m, fds...); err != nil {
		fmt.Fprintf(h.serial, "fake guest: %v\n", err)
	}
}

// reap waits for every exited child (orphans of the guest included) and
// reports the agent's exit.
func (h *guestHelper) reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if int64(pid) == h.agentPID.Load() {
			h.agentPID.Store(-1)
			status := describeWait(ws)
			fmt.Fprintf(h.serial, "fake guest: the guest agent %s; powering off\n", status)
			h.reply(helperMsg{Op: opExited, Status: status})
		}
	}
}

// signalGuest signals the guest's processes: every process of the PID
// namespace but its init (the VMM) and the helper when the namespace is
// the VM's own, else the agent's process group.
func (h *guestHelper) signalGuest(sig syscall.Signal) {
	switch pid := int(h.agentPID.Load()); {
	case h.ownPIDNS:
		_ = unix.Kill(-1, sig)
	case pid > 0:
		_ = unix.Kill(-pid, sig)
	}
}

// setupNetwork makes the guest's network and returns the fds for the VMM:
// one guest TAP per NIC, then the MMDS listener when MMDS is configured.
func (h *guestHelper) setupNetwork(b bootMsg) (fds []int, err error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("find lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return nil, fmt.Errorf("bring lo up: %w", err)
	}
	for i, n := range b.NICs {
		name := fmt.Sprintf("eth%d", i)
		f, err := openTap(devNetTun, name)
		if err != nil {
			return fds, fmt.Errorf("create the guest interface %s: %w", name, err)
		}
		fd, err := unix.Dup(int(f.Fd()))
		f.Close()
		if err != nil {
			return fds, fmt.Errorf("dup the %s fd: %w", name, err)
		}
		unix.CloseOnExec(fd)
		fds = append(fds, fd)
		link, err := netlink.LinkByName(name)
		if err != nil {
			return fds, fmt.Errorf("find %s: %w", name, err)
		}
		if n.MAC != "" {
			mac, err := net.ParseMAC(n.MAC)
			if err != nil {
				return fds, fmt.Errorf("guest_mac %q: %w", n.MAC, err)
			}
			if err := netlink.LinkSetHardwareAddr(link, mac); err != nil {
				return fds, fmt.Errorf("set the MAC of %s: %w", name, err)
			}
		}
		if n.MTU > 0 {
			if err := netlink.LinkSetMTU(link, n.MTU); err != nil {
				return fds, fmt.Errorf("set the MTU of %s: %w", name, err)
			}
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return fds, fmt.Errorf("bring %s up: %w", name, err)
		}
	}
	if ip := b.IP; ip != nil {
		if err := h.configureIP(*ip); err != nil {
			return fds, err
		}
	}
	if b.MMDSAddr != "" {
		fd, err := h.listenMMDS(lo, b.MMDSAddr)
		if err != nil {
			return fds, err
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// configureIP applies the ip= boot argument, as the kernel's IP-Config
// does, and logs it on the console the same way.
func (h *guestHelper) configureIP(ip IPConfig) error {
	link, err := netlink.LinkByName(ip.Device)
	if err != nil {
		fmt.Fprintf(h.serial, "IP-Config: Device `%s' not found.\n", ip.Device)
		return nil
	}
	addr := &netlink.Addr{IPNet: prefixNet(ip.Addr)}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("add %s to %s: %w", ip.Addr, ip.Device, err)
	}
	if ip.Gateway.IsValid() {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(ip.Gateway.AsSlice())}
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("add the default route via %s: %w", ip.Gateway, err)
		}
	}
	fmt.Fprintf(h.serial, "IP-Config: Complete:\n     device=%s, addr=%s, mask=%s, gw=%s\n",
		ip.Device, ip.Addr.Addr(), net.IP(net.CIDRMask(ip.Addr.Bits(), 32)), ip.Gateway)
	return nil
}

// listenMMDS puts addr on lo as a /32 and listens on its port 80.
func (h *guestHelper) listenMMDS(lo netlink.Link, addr string) (int, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return -1, fmt.Errorf("mmds address %q: %w", addr, err)
	}
	h.mmdsAddr = addr
	if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(a, 32))}); err != nil {
		return -1, fmt.Errorf("add the mmds address %s to lo: %w", a, err)
	}
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IP(a.AsSlice()), Port: 80})
	if err != nil {
		return -1, fmt.Errorf("listen for mmds: %w", err)
	}
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		return -1, fmt.Errorf("get the mmds listener fd: %w", err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return -1, fmt.Errorf("dup the mmds listener fd: %w", err)
	}
	unix.CloseOnExec(fd)
	return fd, nil
}

// startAgent starts the guest agent in a session of its own, its output on
// the serial console, and returns its PID (in the VM's PID namespace).
func (h *guestHelper) startAgent() (int, error) {
	if h.agent == "" {
		return 0, errors.New("no guest agent: set KICI_FAKE_GUEST_AGENT or put kici-agent beside bin/fakes/")
	}
	guest := filepath.Join(h.jailRoot, "guest")
	if h.jailRoot == "" {
		guest = filepath.Join(os.TempDir(), fmt.Sprintf("kici-fake-guest-%d", os.Getpid()))
	}
	work, tmp, home := filepath.Join(guest, "work"), filepath.Join(guest, "tmp"), filepath.Join(guest, "home")
	for _, d := range []string{work, tmp, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return 0, fmt.Errorf("make the guest directory %s: %w", d, err)
		}
	}
	env := []string{
		"PATH=" + guestPath,
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"KICI_AGENT_WORKDIR=" + work,
	}
	if h.mmdsAddr != "" {
		env = append(env, "KICI_AGENT_MMDS_URL=http://"+h.mmdsAddr)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	p, err := os.StartProcess(h.agent, []string{h.agent}, &os.ProcAttr{
		Dir:   work,
		Env:   env,
		Files: []*os.File{devnull, os.Stdout, os.Stdout},
		Sys:   &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return 0, fmt.Errorf("start the guest agent %q: %w", h.agent, err)
	}
	pid := p.Pid
	_ = p.Release() // reap() waits for it
	return pid, nil
}

// describeWait renders a wait status.
func describeWait(ws unix.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exited with status %d", ws.ExitStatus())
	case ws.Signaled():
		return "was killed by " + strings.ToUpper(unix.SignalName(ws.Signal()))
	}
	return fmt.Sprintf("ended (wait status %#x)", uint32(ws))
}

// prefixNet converts a netip.Prefix to a *net.IPNet keeping the host bits.
func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// setComm sets the calling thread's name (prctl PR_SET_NAME).
func setComm(name string) error {
	b := append([]byte(name), 0)
	return unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0)
}
