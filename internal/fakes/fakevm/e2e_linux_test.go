package fakevm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/scaler/firecracker/fcapi"
	"github.com/kici-dev/kici/internal/testsvc"
)

func TestMain(m *testing.M) { testsvc.MainInNetNS(m) }

// The host network of the end-to-end tests, in the test's own network
// namespace.
const (
	jailUID    = 10000
	bridgeName = "kicit-br0"
	mmdsURL    = "http://169.254.169.254"
	e2eTimeout = 60 * time.Second
)

var (
	gateway = netip.MustParsePrefix("10.0.0.1/24")
	netmask = "255.255.255.0"
)

// fakeBins are the binaries an end-to-end test runs.
type fakeBins struct{ firecracker, jailer, probe string }

// buildFakes builds the fakes (named firecracker and jailer, as the jail
// layout needs) and the guest probe.
func buildFakes(t *testing.T) fakeBins {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("find the go tool to build the fakes: %v", err)
	}
	dir := t.TempDir()
	b := fakeBins{filepath.Join(dir, "firecracker"), filepath.Join(dir, "jailer"), filepath.Join(dir, "guestprobe")}
	for out, pkg := range map[string]string{
		b.firecracker: "github.com/kici-dev/kici/cmd/fakes/firecracker",
		b.jailer:      "github.com/kici-dev/kici/cmd/fakes/jailer",
		b.probe:       "./testdata/guestprobe",
	} {
		cmd := exec.CommandContext(t.Context(), goTool, "build", "-trimpath", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return b
}

// makeBridge creates the host bridge with the gateway address.
func makeBridge(t *testing.T) *netlink.Bridge {
	t.Helper()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatalf("add bridge %s: %v", bridgeName, err)
	}
	// A MAC of its own: a bridge without one takes its lowest port's, which
	// changes as the parallel subtests add and remove TAPs, and a guest's
	// frames to the gateway's old MAC are lost (as hostnet.EnsureBridge
	// explains).
	if err := netlink.LinkSetHardwareAddr(br, net.HardwareAddr{0x06, 0x00, 0xAC, 0xFE, 0x00, 0x01}); err != nil {
		t.Fatalf("set the MAC of bridge %s: %v", bridgeName, err)
	}
	t.Cleanup(func() {
		if err := netlink.LinkDel(br); err != nil {
			t.Errorf("delete bridge %s: %v", bridgeName, err)
		}
	})
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(gateway.Addr().AsSlice()), Mask: net.CIDRMask(gateway.Bits(), 32)}}
	if err := netlink.AddrAdd(br, addr); err != nil {
		t.Fatalf("add %s to %s: %v", gateway, bridgeName, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		t.Fatalf("bring %s up: %v", bridgeName, err)
	}
	return br
}

// vmEnv is one VM of an end-to-end test: its TAP, address and jail.
type vmEnv struct {
	t       *testing.T
	bins    fakeBins
	id, tap string
	guestIP netip.Addr
	mac     string
	base    string // the chroot base
	root    string // the jail root
	serial  string // the VMM's stdout and stderr
	pidfds  []int
}

// newVMEnv prepares VM number n (2..254): its TAP on the bridge, owned by
// the jailer uid, and its jail root holding a kernel and two drive files
// (dummies), as kici's backend prepares them before it runs the jailer.
func newVMEnv(t *testing.T, bins fakeBins, br *netlink.Bridge, n int) *vmEnv {
	t.Helper()
	base := t.TempDir()
	e := &vmEnv{
		t: t, bins: bins, id: fmt.Sprintf("e2e-%08x", n), tap: fmt.Sprintf("kici-%08x", n),
		guestIP: netip.AddrFrom4([4]byte{10, 0, 0, byte(n)}), mac: fmt.Sprintf("06:00:AC:00:00:%02X", n),
		base: base, serial: filepath.Join(t.TempDir(), "serial.log"),
	}
	e.root = filepath.Join(base, "firecracker", e.id, "root")
	if sock := e.socket(); len(sock) > 107 {
		t.Fatalf("socket path %q is %d bytes, over the unix socket limit: shorten the test name", sock, len(sock))
	}
	if err := os.MkdirAll(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"vmlinux", "rootfs.ext4", "overlay.ext4"} {
		p := filepath.Join(e.root, f)
		if err := os.WriteFile(p, []byte("dummy "+f+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, jailUID, jailUID); err != nil {
			t.Fatal(err)
		}
	}
	tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: e.tap}, Mode: netlink.TUNTAP_MODE_TAP, Owner: jailUID, Group: jailUID}
	if err := netlink.LinkAdd(tap); err != nil {
		t.Fatalf("add tap %s: %v", e.tap, err)
	}
	t.Cleanup(func() {
		if err := netlink.LinkDel(tap); err != nil {
			t.Errorf("delete tap %s: %v", e.tap, err)
		}
	})
	if err := netlink.LinkSetMaster(tap, br); err != nil {
		t.Fatalf("enslave %s to %s: %v", e.tap, bridgeName, err)
	}
	if err := netlink.LinkSetUp(tap); err != nil {
		t.Fatalf("bring %s up: %v", e.tap, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{e.serial, filepath.Join(e.root, "vmm.log")} {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", f, b)
			}
		}
		for _, fd := range e.pidfds {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
		}
	})
	return e
}

func (e *vmEnv) socket() string { return filepath.Join(e.root, "run", "firecracker.socket") }

// jailer returns the jailer's command line for this VM.
func (e *vmEnv) jailer(ctx context.Context, newPIDNS bool, fcArgs ...string) *exec.Cmd {
	args := []string{"--id", e.id, "--exec-file", e.bins.firecracker, "--uid", strconv.Itoa(jailUID), "--gid", strconv.Itoa(jailUID),
		"--chroot-base-dir", e.base, "--cgroup-version", "2"}
	if newPIDNS {
		args = append(args, "--new-pid-ns")
	}
	args = append(args, "--", "--api-sock", "/run/firecracker.socket", "--log-path", "/vmm.log", "--level", "Info")
	args = append(args, fcArgs...)
	cmd := exec.CommandContext(ctx, e.bins.jailer, args...)
	cmd.Env = append(os.Environ(), "KICI_FAKE_GUEST_AGENT="+e.bins.probe)
	serial, err := os.OpenFile(e.serial, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { serial.Close() })
	cmd.Stdout, cmd.Stderr = serial, serial
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// watch opens a pidfd on pid, to wait for its end and to kill it at
// cleanup without hitting a recycled PID.
func (e *vmEnv) watch(pid int) int {
	e.t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		e.t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	e.pidfds = append(e.pidfds, fd)
	return fd
}

// boot configures the VM as kici's backend does and starts it; the guest
// reports to ln. It returns the VMM's PID read from the pid file.
func (e *vmEnv) boot(ctx context.Context, ln net.Listener, mode, nonce string) (*fcapi.Client, int) {
	t := e.t
	t.Helper()
	if err := fcapi.WaitReady(ctx, e.socket(), 10*time.Millisecond); err != nil {
		t.Fatalf("wait for the api: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(e.root, "firecracker.pid"))
	if err != nil {
		t.Fatalf("read the pid file: %v", err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil || pid <= 0 {
		t.Fatalf("pid file holds %q, want a PID", b)
	}
	c := fcapi.New(e.socket())
	t.Cleanup(c.Close)
	if mode == "" { // started from --config-file: only the MMDS data is left
		if err := c.PutMMDS(ctx, e.metadata(ln, "stay", nonce)); err != nil {
			t.Fatalf("put the MMDS data: %v", err)
		}
		return c, pid
	}
	info, err := c.Describe(ctx)
	if err != nil || info.ID != e.id || info.State != fcapi.StateNotStarted || info.AppName != "Firecracker" {
		t.Fatalf("describe: got %+v, %v, want %s not started", info, err, e.id)
	}
	calls := []error{
		c.PutMachineConfig(ctx, fcapi.MachineConfig{VCPUCount: 2, MemSizeMib: 256}),
		c.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: "/vmlinux", BootArgs: e.bootArgs()}),
		c.PutDrive(ctx, fcapi.Drive{DriveID: "rootfs", PathOnHost: "/rootfs.ext4", IsRootDevice: true, IsReadOnly: true}),
		c.PutDrive(ctx, fcapi.Drive{DriveID: "overlay", PathOnHost: "/overlay.ext4"}),
		c.PutNetworkInterface(ctx, fcapi.NetworkInterface{IfaceID: "eth0", HostDevName: e.tap, GuestMAC: e.mac}),
		c.PutMMDSConfig(ctx, fcapi.MMDSConfig{Version: fcapi.MMDSVersion2, NetworkInterfaces: []string{"eth0"}}),
		c.PutMMDS(ctx, e.metadata(ln, mode, nonce)),
		c.Action(ctx, fcapi.InstanceStart),
	}
	if err := errors.Join(calls...); err != nil {
		t.Fatalf("configure and start the VM: %v", err)
	}
	return c, pid
}

// metadata is the MMDS data store of a test VM.
func (e *vmEnv) metadata(ln net.Listener, mode, nonce string) map[string]any {
	return map[string]any{"latest": map[string]any{"meta-data": map[string]string{
		"report-to": ln.Addr().String(), "mode": mode, "nonce": nonce,
	}}}
}

// bootArgs is the kernel command line kici's backend writes.
func (e *vmEnv) bootArgs() string {
	return fmt.Sprintf("console=ttyS0 reboot=k panic=1 random.trust_cpu=on init=/init ip=%s::%s:%s::eth0:off", e.guestIP, gateway.Addr(), netmask)
}

// probeReport is what the guest probe sends.
type probeReport struct {
	Meta          map[string]string `json:"meta"`
	NoTokenStatus int               `json:"no_token_status"`
	Env           map[string]string `json:"env"`
	Cwd           string            `json:"cwd"`
}

// accept waits for the guest's report and checks it came from the guest's
// address through the TAP and bridge, with the MMDS data it read.
func (e *vmEnv) accept(ln *net.TCPListener, nonce string) (net.Conn, *bufio.Reader) {
	t := e.t
	t.Helper()
	_ = ln.SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("wait for the guest to connect: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	rd := bufio.NewReader(conn)
	var rep probeReport
	if err := json.NewDecoder(strings.NewReader(readLine(t, rd))).Decode(&rep); err != nil {
		t.Fatalf("decode the guest's report: %v", err)
	}
	if got := conn.RemoteAddr().(*net.TCPAddr).IP.String(); got != e.guestIP.String() {
		t.Errorf("got the guest's connection from %s, want %s", got, e.guestIP)
	}
	if rep.Meta["nonce"] != nonce {
		t.Errorf("got nonce %q from MMDS, want %q", rep.Meta["nonce"], nonce)
	}
	if rep.NoTokenStatus != 401 {
		t.Errorf("got status %d for an MMDS GET without a token, want 401", rep.NoTokenStatus)
	}
	work := filepath.Join(e.root, "guest", "work")
	want := map[string]string{
		"KICI_AGENT_MMDS_URL": mmdsURL, "KICI_AGENT_WORKDIR": work, "TMPDIR": filepath.Join(e.root, "guest", "tmp"),
		"HOME": filepath.Join(e.root, "guest", "home"),
	}
	for k, v := range want {
		if rep.Env[k] != v {
			t.Errorf("guest env %s: got %q, want %q", k, rep.Env[k], v)
		}
	}
	if rep.Cwd != work || rep.Env["PATH"] == "" {
		t.Errorf("guest cwd %q and PATH %q: want %q and a PATH", rep.Cwd, rep.Env["PATH"], work)
	}
	// The frames crossed the host TAP both ways.
	link, err := netlink.LinkByName(e.tap)
	if err != nil {
		t.Fatal(err)
	}
	if st := link.Attrs().Statistics; st == nil || st.RxPackets == 0 || st.TxPackets == 0 {
		t.Errorf("host tap %s statistics %+v: want frames both ways", e.tap, st)
	}
	return conn, rd
}

func readLine(t *testing.T, rd *bufio.Reader) string {
	t.Helper()
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("read from the guest: %v", err)
	}
	return line
}

// checkJailed checks the VMM's identity as kici's backend probes it: comm
// "firecracker", its root the jail root, running as the jailer uid.
func (e *vmEnv) checkJailed(pid int) {
	t := e.t
	t.Helper()
	if comm := procFile(t, pid, "comm"); comm != "firecracker" {
		t.Errorf("/proc/%d/comm: got %q, want firecracker", pid, comm)
	}
	var proot, jroot syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/root", pid), &proot); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(e.root, &jroot); err != nil {
		t.Fatal(err)
	}
	if proot.Dev != jroot.Dev || proot.Ino != jroot.Ino {
		t.Errorf("/proc/%d/root is %d:%d, want the jail root %d:%d", pid, proot.Dev, proot.Ino, jroot.Dev, jroot.Ino)
	}
	if uid := statusField(t, pid, "Uid"); !strings.HasPrefix(uid, strconv.Itoa(jailUID)+"\t") {
		t.Errorf("/proc/%d/status Uid: got %q, want %d", pid, uid, jailUID)
	}
	for _, dev := range []string{"dev/kvm", "dev/net/tun"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(e.root, dev), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Uid != jailUID {
			t.Errorf("jail %s: got mode %o uid %d (%v), want a character device of uid %d", dev, st.Mode, st.Uid, err, jailUID)
		}
	}
}

// guestHelperOf returns the PID of the VMM's guest helper (comm fc-guest),
// checking that it lives in a network namespace of its own.
func guestHelperOf(t *testing.T, vmm int) int {
	t.Helper()
	for _, c := range children(t, vmm) {
		if procFile(t, c, "comm") == "fc-guest" {
			if nsOf(t, c, "net") == nsOf(t, vmm, "net") {
				t.Errorf("the guest helper %d shares the VMM's network namespace", c)
			}
			return c
		}
	}
	t.Fatalf("no fc-guest child of the VMM %d", vmm)
	return 0
}

func TestJailedVM(t *testing.T) {
	testsvc.NetNS(t)
	bins := buildFakes(t)
	br := makeBridge(t)

	// The brief's main case: a jailed VM in its own PID namespace boots a
	// guest that reads MMDS and reaches the host over TAP and bridge, and
	// the whole guest dies with a SIGKILL of the VMM.
	t.Run("kill", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		e := newVMEnv(t, bins, br, 2)
		ln := listen(t)
		if err := e.jailer(ctx, true).Run(); err != nil {
			t.Fatalf("run the jailer: %v", err)
		}
		_, vmm := e.boot(ctx, ln, "stay", "nonce-kill")
		vmmFD := e.watch(vmm)
		e.checkJailed(vmm)
		helper := guestHelperOf(t, vmm)
		helperFD := e.watch(helper)
		e.accept(ln, "nonce-kill")
		var probe int
		for _, c := range children(t, helper) {
			if procFile(t, c, "comm") == "guestprobe" {
				probe = c
			}
		}
		if probe == 0 {
			t.Fatalf("no guest agent under the guest helper %d", helper)
		}
		probeFD := e.watch(probe)
		if nsOf(t, probe, "pid") != nsOf(t, vmm, "pid") || nsOf(t, vmm, "pid") == nsOf(t, os.Getpid(), "pid") {
			t.Errorf("the guest agent is not in the VMM's own PID namespace")
		}
		if err := unix.PidfdSendSignal(vmmFD, unix.SIGKILL, nil, 0); err != nil {
			t.Fatalf("kill the VMM: %v", err)
		}
		waitGone(t, "the VMM", vmmFD, 10*time.Second)
		waitGone(t, "the guest helper", helperFD, 10*time.Second)
		waitGone(t, "the guest agent", probeFD, 10*time.Second)
	})

	// Without --new-pid-ns the jailer becomes the VMM; the guest agent's
	// exit powers the VM off and the VMM exits 0.
	t.Run("poweroff", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		e := newVMEnv(t, bins, br, 3)
		ln := listen(t)
		cmd := e.jailer(ctx, false)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start the jailer: %v", err)
		}
		_, vmm := e.boot(ctx, ln, "exit", "nonce-poweroff")
		if vmm != cmd.Process.Pid {
			t.Errorf("pid file holds %d, want the jailer's own %d (exec in place)", vmm, cmd.Process.Pid)
		}
		e.checkJailed(vmm)
		helperFD := e.watch(guestHelperOf(t, vmm))
		conn, _ := e.accept(ln, "nonce-poweroff")
		if _, err := conn.Write([]byte("exit\n")); err != nil {
			t.Fatalf("tell the guest to exit: %v", err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the VMM after the guest's power-off: got %v, want exit 0", err)
		}
		waitGone(t, "the guest helper", helperFD, 10*time.Second)
	})

	// kici's backend starts the VMM with --config-file, so the VM boots at
	// once, and writes MMDS afterwards: the guest waits for its data.
	t.Run("configfile", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		e := newVMEnv(t, bins, br, 5)
		e.configFile()
		ln := listen(t)
		if err := e.jailer(ctx, true, "--config-file", "/config.json").Run(); err != nil {
			t.Fatalf("run the jailer: %v", err)
		}
		c, vmm := e.boot(ctx, ln, "", "nonce-config")
		vmmFD := e.watch(vmm)
		if info, err := c.Describe(ctx); err != nil || info.State != fcapi.StateRunning {
			t.Fatalf("got %+v, %v, want a VM running from its config file", info, err)
		}
		e.accept(ln, "nonce-config")
		if err := c.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: "/vmlinux"}); !fcapi.IsStatus(err, 400) {
			t.Errorf("PUT /boot-source after a config-file boot: got %v, want a 400", err)
		}
		if err := unix.PidfdSendSignal(vmmFD, unix.SIGKILL, nil, 0); err != nil {
			t.Fatalf("kill the VMM: %v", err)
		}
		waitGone(t, "the VMM", vmmFD, 10*time.Second)
	})

	// SendCtrlAltDel: the guest gets SIGTERM, ends, and the VM powers off.
	t.Run("ctrlaltdel", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
		defer cancel()
		e := newVMEnv(t, bins, br, 4)
		ln := listen(t)
		if err := e.jailer(ctx, true).Run(); err != nil {
			t.Fatalf("run the jailer: %v", err)
		}
		c, vmm := e.boot(ctx, ln, "term", "nonce-cad")
		vmmFD := e.watch(vmm)
		_, rd := e.accept(ln, "nonce-cad")
		if err := c.PatchVM(ctx, fcapi.VMPaused); err != nil {
			t.Fatalf("pause: %v", err)
		}
		if info, err := c.Describe(ctx); err != nil || info.State != fcapi.StatePaused {
			t.Errorf("got %+v, %v, want Paused", info, err)
		}
		if err := c.PatchVM(ctx, fcapi.VMResumed); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if err := c.Action(ctx, fcapi.SendCtrlAltDel); err != nil {
			t.Fatalf("ctrl-alt-del: %v", err)
		}
		if line := readLine(t, rd); line != "sigterm\n" {
			t.Errorf("got %q from the guest, want sigterm", line)
		}
		waitGone(t, "the VMM", vmmFD, 10*time.Second)
		if b, _ := os.ReadFile(e.serial); !strings.Contains(string(b), "IP-Config: Complete") {
			t.Errorf("serial console %q: want the guest's IP-Config line", b)
		}
	})
}

// configFile writes the --config-file document of kici's backend into the
// jail root.
func (e *vmEnv) configFile() {
	doc := map[string]any{
		"boot-source": map[string]any{"kernel_image_path": "/vmlinux", "boot_args": e.bootArgs()},
		"drives": []map[string]any{
			{"drive_id": "rootfs", "path_on_host": "/rootfs.ext4", "is_root_device": true, "is_read_only": true},
			{"drive_id": "overlay", "path_on_host": "/overlay.ext4", "is_root_device": false, "is_read_only": false},
		},
		"machine-config":     map[string]any{"vcpu_count": 2, "mem_size_mib": 512, "smt": false},
		"network-interfaces": []map[string]any{{"iface_id": "eth0", "guest_mac": e.mac, "host_dev_name": e.tap}},
		"mmds-config":        map[string]any{"version": "V2", "network_interfaces": []string{"eth0"}, "ipv4_address": "169.254.169.254"},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		e.t.Fatal(err)
	}
	p := filepath.Join(e.root, "config.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chown(p, jailUID, jailUID); err != nil {
		e.t.Fatal(err)
	}
}

// listen listens on the bridge's gateway address.
func listen(t *testing.T) *net.TCPListener {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IP(gateway.Addr().AsSlice())})
	if err != nil {
		t.Fatalf("listen on the gateway: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
