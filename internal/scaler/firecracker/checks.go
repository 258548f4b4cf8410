package firecracker

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kici-dev/kici/internal/scaler"
)

// MinFreeBytes is the free space a chroot volume needs for a spawn (the
// disk guard): a VM's overlay is sparse, but a full disk makes every later
// write of the host fail.
const MinFreeBytes int64 = 1 << 30

// check is one host prerequisite while it is worked out.
type check struct {
	Name string
	// OK is false when a spawn would be refused for it; Warn marks a
	// missing piece that does not refuse spawns.
	OK     bool
	Warn   bool
	Detail string
	Fix    string
}

func (c check) hostCheck() scaler.HostCheck {
	st := "pass"
	switch {
	case !c.OK && c.Warn:
		st = "warn"
	case !c.OK:
		st = "fail"
	}
	hc := scaler.HostCheck{Name: c.Name, Status: st, Detail: c.Detail}
	if !c.OK {
		hc.Fix = c.Fix
	}
	return hc
}

// HostChecks reports every host prerequisite of the scaler's VMs, for the
// label sets given (each one's kernel and rootfs). It never changes
// anything.
func (b *Backend) HostChecks(sets []scaler.LabelSet) []scaler.HostCheck {
	cs := append(b.checks(sets), b.warmChecks(sets)...)
	out := make([]scaler.HostCheck, len(cs))
	for i, c := range cs {
		out[i] = c.hostCheck()
	}
	return out
}

func (b *Backend) checks(sets []scaler.LabelSet) []check {
	out := []check{
		deviceCheck("kvm", "/dev/kvm", "load the kvm module (kvm_intel or kvm_amd) and run the orchestrator as root or in the kvm group; nested virtualisation must be on in a VM"),
		deviceCheck("tun", "/dev/net/tun", "load the tun module (modprobe tun)"),
		execCheck("firecracker", b.cfg.FirecrackerPath),
		execCheck("jailer", b.cfg.JailerPath),
		readCheck("kernel", b.cfg.KernelPath, "put the guest kernel (an uncompressed vmlinux on x86_64) there, or fix kernelPath"),
	}
	for _, ls := range sets {
		if k := ls.Firecracker.KernelPath; k != "" && k != b.cfg.KernelPath {
			out = append(out, readCheck("kernel "+ls.Key(), k, "put the guest kernel there, or fix the label set's kernelPath"))
		}
		out = append(out, readCheck("rootfs "+ls.Key(), ls.Firecracker.RootfsPath, "put the guest's ext4 root filesystem there (it must start kici-agent with KICI_AGENT_MMDS_URL; docs/scaler.md), or fix rootfsPath"))
	}
	out = append(out, b.diskCheck(), cgroupCheck())
	net := check{Name: "network " + b.host.Bridge(), OK: true, Detail: "bridge, rules and port isolation in place"}
	if err := b.host.Ready(); err != nil {
		net = check{Name: net.Name, Detail: err.Error(), Fix: "let the orchestrator provision the bridge (firecracker.autoProvisionHost: true, root or CAP_NET_ADMIN) or create it with the gateway address and restart"}
	}
	return append(out, net)
}

// spawnCheck is the first check that refuses a spawn of ls, as a
// deterministic spawn error naming what is missing, or nil.
func (b *Backend) spawnCheck(ls scaler.LabelSet) error {
	for _, c := range b.checks([]scaler.LabelSet{ls}) {
		if !c.OK && !c.Warn {
			return scaler.Refused("%s: %s (%s)", c.Name, c.Detail, c.Fix)
		}
	}
	return nil
}

func deviceCheck(name, path, fix string) check {
	c := check{Name: name, Fix: fix}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		c.Detail = fmt.Sprintf("%s cannot be opened read-write: %v", path, err)
		return c
	}
	_ = unix.Close(fd)
	c.OK, c.Detail = true, path+" opens read-write"
	return c
}

func execCheck(name, path string) check {
	c := check{Name: name, Fix: fmt.Sprintf("install the %s binary there (a static release from github.com/firecracker-microvm/firecracker), or fix %sPath", name, name)}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		c.Detail = fmt.Sprintf("%s: %v", path, errors.Unwrap(err))
	case !fi.Mode().IsRegular():
		c.Detail = path + " is not a regular file"
	case unix.Access(path, unix.X_OK) != nil:
		c.Detail = path + " is not executable"
	default:
		c.OK, c.Detail = true, path+" is executable"
	}
	return c
}

func readCheck(name, path, fix string) check {
	c := check{Name: name, Fix: fix}
	if path == "" {
		c.Detail = "no path configured"
		return c
	}
	f, err := os.Open(path)
	if err != nil {
		c.Detail = fmt.Sprintf("%s: %v", path, errors.Unwrap(err))
		return c
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		c.Detail = path + " is not a regular file"
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("%s is readable (%d bytes)", path, fi.Size())
	return c
}

func (b *Backend) diskCheck() check {
	c := check{Name: "disk " + b.cfg.ChrootBaseDir, Fix: "free space on that volume, or run `kici-admin scaler orphans list` to find leftover VMs"}
	if b.cfg.MinFreeBytes < 0 {
		c.OK, c.Detail = true, "not checked"
		return c
	}
	free, err := freeBytes(b.cfg.ChrootBaseDir)
	if err != nil {
		c.Detail = err.Error()
		c.Fix = "create the chroot base dir (chrootBaseDir) on a volume with space"
		return c
	}
	c.Detail = fmt.Sprintf("%d MiB free, %d MiB needed", free>>20, b.cfg.MinFreeBytes>>20)
	c.OK = free >= b.cfg.MinFreeBytes
	return c
}

// freeBytes is the space an unprivileged writer could use on the volume
// of path, or of its nearest existing parent.
func freeBytes(path string) (int64, error) {
	for p := path; ; {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return int64(st.Bavail) * st.Bsize, nil
		}
		parent := parentDir(p)
		if !errors.Is(err, unix.ENOENT) || parent == p {
			return 0, fmt.Errorf("statfs %s: %w", p, err)
		}
		p = parent
	}
}

func parentDir(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}

// cgroupV2 reports whether /sys/fs/cgroup is a cgroup v2 hierarchy.
func cgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// cgroupVersion is the --cgroup-version the jailer gets: 2 on a unified
// hierarchy, else 1 (the jailer refuses 2 without a cgroup2 mount).
func cgroupVersion() string {
	if cgroupV2() {
		return "2"
	}
	return "1"
}

// cgroupCheck warns when the host has no cgroup v2 hierarchy at
// /sys/fs/cgroup: the jailer then runs with --cgroup-version 1.
func cgroupCheck() check {
	c := check{Name: "cgroup v2", Warn: true, Fix: "boot with systemd.unified_cgroup_hierarchy=1 so that /sys/fs/cgroup is cgroup v2"}
	if !cgroupV2() {
		c.Detail = "/sys/fs/cgroup is not a cgroup v2 hierarchy: the jailer runs with --cgroup-version 1"
		return c
	}
	c.OK, c.Warn, c.Detail = true, false, "/sys/fs/cgroup is cgroup v2"
	return c
}
