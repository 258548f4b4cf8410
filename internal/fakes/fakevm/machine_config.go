package fakevm

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
)

// maxVCPUs is Firecracker's MAX_SUPPORTED_VCPUS.
const maxVCPUs = 32

// The configuration calls of the API. Each refuses with msgPostBoot once
// the VM left "Not started", except those Firecracker allows at run time
// (MMDS data, PATCH of drives and interfaces).

// putMachineConfig is PUT /machine-config: omitted optional fields take
// their defaults.
func (m *Machine) putMachineConfig(mc machineConfig) error {
	if mc.VCPUCount == nil {
		return deserializeFault("missing field `vcpu_count`")
	}
	if mc.MemSizeMib == nil {
		return deserializeFault("missing field `mem_size_mib`")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	next := machineState{HugePages: "None"}
	applyMachineConfig(&next, mc)
	return m.setMachineLocked(next)
}

// patchMachineConfig is PATCH /machine-config: omitted fields keep their
// values.
func (m *Machine) patchMachineConfig(mc machineConfig) error {
	if mc == (machineConfig{}) {
		return fault("Empty PATCH request.")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	next := m.machine
	applyMachineConfig(&next, mc)
	return m.setMachineLocked(next)
}

func applyMachineConfig(ms *machineState, mc machineConfig) {
	if mc.VCPUCount != nil {
		ms.VCPUCount = *mc.VCPUCount
	}
	if mc.MemSizeMib != nil {
		ms.MemSizeMib = *mc.MemSizeMib
	}
	if mc.SMT != nil {
		ms.SMT = *mc.SMT
	}
	if mc.TrackDirtyPages != nil {
		ms.TrackDirtyPages = *mc.TrackDirtyPages
	}
	if mc.HugePages != nil {
		ms.HugePages = *mc.HugePages
	}
}

func (m *Machine) setMachineLocked(ms machineState) error {
	if ms.VCPUCount < 1 || ms.VCPUCount > maxVCPUs || (ms.SMT && ms.VCPUCount > 1 && ms.VCPUCount%2 != 0) {
		return fault("Machine config error: The number of vCPUs must be greater than 0, less than %d and must be 1 or an even number if SMT is enabled.", maxVCPUs)
	}
	if ms.MemSizeMib <= 0 {
		return fault("Machine config error: The memory size (MiB) is either 0, or not a multiple of the configured page size.")
	}
	switch ms.HugePages {
	case "None", "Transparent":
	case "2M":
		if ms.MemSizeMib%2 != 0 {
			return fault("Machine config error: The memory size (MiB) is either 0, or not a multiple of the configured page size.")
		}
	default:
		return deserializeFault(fmt.Sprintf("unknown variant `%s`, expected one of `None`, `Transparent`, `2M`", ms.HugePages))
	}
	m.machine = ms
	m.bootPath = true
	return nil
}

// machineConfig returns the machine configuration (GET /machine-config).
func (m *Machine) machineConfig() machineState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.machine
}

// putBootSource is PUT /boot-source: the kernel must be readable.
func (m *Machine) putBootSource(bs bootSource) error {
	if bs.KernelImagePath == nil {
		return deserializeFault("missing field `kernel_image_path`")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	if err := readable(m.resolve(*bs.KernelImagePath)); err != nil {
		return fault("Boot source error: The kernel file cannot be opened: %v", errnoText(err))
	}
	if bs.InitrdPath != "" {
		if err := readable(m.resolve(bs.InitrdPath)); err != nil {
			return fault("Boot source error: The initrd file cannot be opened due to invalid path or invalid permissions. %v", errnoText(err))
		}
	}
	m.boot = &bootState{KernelImagePath: *bs.KernelImagePath, BootArgs: bs.BootArgs, InitrdPath: bs.InitrdPath}
	m.bootPath = true
	return nil
}

// putDrive is PUT /drives/{id}: the backing file must open with the
// drive's access mode; a second root drive is refused.
func (m *Machine) putDrive(d drive) error {
	if d.IsRootDevice == nil {
		return deserializeFault("missing field `is_root_device`")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		// Firecracker hot-plugs drives after boot only with PCI enabled.
		return fault(msgPostBoot)
	}
	return m.addDriveLocked(d)
}

func (m *Machine) addDriveLocked(d drive) error {
	if d.Socket != nil {
		return fault("Drive config error: fake firecracker: vhost-user-block drives (socket) are not implemented.")
	}
	if d.PathOnHost == nil {
		return fault("Drive config error: Unable to create the virtio block device: path_on_host is required for a virtio-block drive")
	}
	ro := d.IsReadOnly != nil && *d.IsReadOnly
	if err := openable(m.resolve(*d.PathOnHost), ro); err != nil {
		return fault("Drive config error: Unable to create the virtio block device: Virtio backend error: Error manipulating the backing file: %v %s", errnoText(err), *d.PathOnHost)
	}
	ds := driveState{
		DriveID: *d.DriveID, PathOnHost: *d.PathOnHost, IsRootDevice: *d.IsRootDevice, IsReadOnly: ro,
		PartUUID: d.PartUUID, CacheType: orDefault(d.CacheType, "Unsafe"), IOEngine: orDefault(d.IOEngine, "Sync"),
	}
	rest := slices.DeleteFunc(slices.Clone(m.drives), func(x driveState) bool { return x.DriveID == ds.DriveID })
	if ds.IsRootDevice {
		if len(rest) > 0 && rest[0].IsRootDevice {
			return fault("Drive config error: A root block device already exists!")
		}
		m.drives = append([]driveState{ds}, rest...)
	} else {
		// Keep the drive's place when it is updated.
		if i := slices.IndexFunc(m.drives, func(x driveState) bool { return x.DriveID == ds.DriveID }); i >= 0 && !m.drives[i].IsRootDevice {
			m.drives[i] = ds
		} else {
			m.drives = append(rest, ds)
		}
	}
	m.bootPath = true
	return nil
}

// patchDrive is PATCH /drives/{id} (post-boot): a new backing file or rate
// limiter.
func (m *Machine) patchDrive(d partialDrive) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == stateNotStarted {
		return fault(msgPreBoot)
	}
	i := slices.IndexFunc(m.drives, func(x driveState) bool { return x.DriveID == *d.DriveID })
	if i < 0 {
		return fault("Drive config error: Unable to patch the block device: Device manager error: Unknown device. Please verify the request arguments.")
	}
	if d.PathOnHost != nil {
		if err := openable(m.resolve(*d.PathOnHost), m.drives[i].IsReadOnly); err != nil {
			return fault("Drive config error: Unable to patch the block device: %v %s Please verify the request arguments.", errnoText(err), *d.PathOnHost)
		}
		m.drives[i].PathOnHost = *d.PathOnHost
	}
	return nil
}

// putNetworkInterface is PUT /network-interfaces/{id}: it opens the host
// TAP now, as Firecracker creates the net device (and opens its TAP) at
// this call.
func (m *Machine) putNetworkInterface(n networkInterface) error {
	if n.HostDevName == nil {
		return deserializeFault("missing field `host_dev_name`")
	}
	if n.GuestMAC != "" {
		if _, err := net.ParseMAC(n.GuestMAC); err != nil || len(strings.Split(n.GuestMAC, ":")) != 6 {
			return deserializeFault(fmt.Sprintf("invalid MAC address %q", n.GuestMAC))
		}
	}
	if n.MTU != nil && (*n.MTU < 68 || *n.MTU > 65535) {
		return fault("Network config error: Could not create the network device: invalid MTU %d (68..65535)", *n.MTU)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	ns := netState{IfaceID: *n.IfaceID, HostDevName: *n.HostDevName, GuestMAC: n.GuestMAC}
	if n.MTU != nil {
		ns.MTU = *n.MTU
	}
	if err := m.addNICLocked(ns); err != nil {
		return err
	}
	m.bootPath = true
	return nil
}

func (m *Machine) addNICLocked(ns netState) error {
	for _, o := range m.nics {
		if o.IfaceID != ns.IfaceID && ns.GuestMAC != "" && strings.EqualFold(o.GuestMAC, ns.GuestMAC) {
			return fault("Network config error: The MAC address is already in use: %s", ns.GuestMAC)
		}
	}
	// A re-configured interface gives its TAP up first, or the TAP (not
	// multi-queue) could not be attached again.
	i := slices.IndexFunc(m.nics, func(o *nic) bool { return o.IfaceID == ns.IfaceID })
	if i >= 0 && m.nics[i].tap != nil {
		m.nics[i].tap.Close()
		m.nics[i].tap = nil
	}
	tap, err := m.cfg.OpenTap(ns.HostDevName)
	if err != nil {
		if i >= 0 {
			m.nics = slices.Delete(m.nics, i, i+1)
		}
		return fault("Network config error: Could not create the network device: Open tap device failed: %v", err)
	}
	if i >= 0 {
		m.nics[i] = &nic{netState: ns, tap: tap}
	} else {
		m.nics = append(m.nics, &nic{netState: ns, tap: tap})
	}
	return nil
}

// patchNetworkInterface is PATCH /network-interfaces/{id} (post-boot): the
// rate limiters, which the fake does not enforce.
func (m *Machine) patchNetworkInterface(n partialNetworkInterface) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == stateNotStarted {
		return fault(msgPreBoot)
	}
	if !slices.ContainsFunc(m.nics, func(o *nic) bool { return o.IfaceID == *n.IfaceID }) {
		return fault("Network config error: Unable to update the net device: Device manager error: Unknown device.")
	}
	return nil
}

// putMMDSConfig is PUT /mmds/config.
func (m *Machine) putMMDSConfig(c mmdsConfig) error {
	if c.NetworkInterfaces == nil {
		return deserializeFault("missing field `network_interfaces`")
	}
	version := orDefault(c.Version, "V1")
	if version != "V1" && version != "V2" {
		return deserializeFault(fmt.Sprintf("unknown variant `%s`, expected `V1` or `V2`", version))
	}
	addr := netip.MustParseAddr("169.254.169.254")
	if c.IPv4Address != nil {
		a, err := netip.ParseAddr(*c.IPv4Address)
		if err != nil || !a.Is4() {
			return deserializeFault(fmt.Sprintf("invalid IP address syntax %q", *c.IPv4Address))
		}
		addr = a
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	// "MMMDS" is Firecracker's text, typo included.
	if !mmdsLinkLocal(addr) {
		return fault("MMMDS config error: The MMDS IPv4 address is not link local.")
	}
	if len(*c.NetworkInterfaces) == 0 {
		return fault("MMMDS config error: The list of network interface IDs that allow forwarding MMDS requests is empty.")
	}
	for _, id := range *c.NetworkInterfaces {
		if !slices.ContainsFunc(m.nics, func(o *nic) bool { return o.IfaceID == id }) {
			return fault("MMMDS config error: The list of network interface IDs provided contains at least one ID that does not correspond to any existing network interface.")
		}
	}
	m.mmdsCfg = &mmdsState{Version: version, NetworkInterfaces: slices.Clone(*c.NetworkInterfaces), IPv4Address: addr, IMDSCompat: c.IMDSCompat}
	m.store.configure(version, c.IMDSCompat)
	m.mmdsCreated = true
	m.bootPath = true
	return nil
}

// mmdsLinkLocal is Firecracker's is_link_local_valid: 169.254.0.0/16 but
// not its first and last /24.
func mmdsLinkLocal(a netip.Addr) bool {
	b := a.As4()
	return b[0] == 169 && b[1] == 254 && b[2] != 0 && b[2] != 255
}

// putMMDS, patchMMDS and getMMDS are the data store calls (any time).
func (m *Machine) putMMDS(doc any) error {
	if err := m.mmdsUsable(); err != nil {
		return err
	}
	return mmdsFault(m.store.put(doc))
}

func (m *Machine) patchMMDS(doc any) error {
	if err := m.mmdsUsable(); err != nil {
		return err
	}
	return mmdsFault(m.store.patch(doc))
}

func (m *Machine) getMMDS() (any, error) {
	if err := m.mmdsUsable(); err != nil {
		return nil, err
	}
	doc := m.store.document()
	if doc == nil {
		doc = map[string]any{}
	}
	return doc, nil
}

// mmdsUsable creates the MMDS before boot (Firecracker makes it on first
// use) and refuses the data store calls after a boot without one.
func (m *Machine) mmdsUsable() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == stateNotStarted {
		m.mmdsCreated = true
	}
	if !m.mmdsCreated {
		return fault("MMDS error: %v", errMMDSNotInitialized)
	}
	return nil
}

func mmdsFault(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errMMDSLimit):
		return &apiFault{status: http.StatusRequestEntityTooLarge, msg: "MMDS limit exceeded error: " + err.Error()}
	default:
		return fault("MMDS error: %v", err)
	}
}

// putLogger is PUT /logger (pre-boot).
func (m *Machine) putLogger(l loggerConfig) error {
	level, ok := parseLevel(orDefault(l.Level, "Info"))
	if !ok {
		return deserializeFault(fmt.Sprintf("unknown variant `%s`, expected one of `Off`, `Trace`, `Debug`, `Info`, `Warning`, `Error`", l.Level))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	if l.LogPath != "" {
		f, err := openLogFile(m.resolve(l.LogPath))
		if err != nil {
			return fault("Logger error: Failed to open target file: %v", errnoText(err))
		}
		m.logw.set(f)
	}
	m.level.Set(level)
	m.loggerSet = true
	return nil
}

// putMetrics is PUT /metrics (pre-boot, once).
func (m *Machine) putMetrics(c metricsConfig) error {
	if c.MetricsPath == nil {
		return deserializeFault("missing field `metrics_path`")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	if m.metrics != nil {
		return fault("Metrics error: Reinitialization of metrics not allowed.")
	}
	f, err := openLogFile(m.resolve(*c.MetricsPath))
	if err != nil {
		return fault("Metrics error: Cannot initialize the metrics system due to bad user input: %v", errnoText(err))
	}
	m.metrics = f
	return nil
}

// vmConfig is GET /vm/config.
func (m *Machine) vmConfig() vmConfig {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.vmConfigLocked()
}

func (m *Machine) vmConfigLocked() vmConfig {
	c := vmConfig{
		BootSource: m.boot, Drives: slices.Clone(m.drives), MachineConfig: m.machine,
		MMDSConfig: m.mmdsCfg, NetworkInterfaces: []netState{},
	}
	if c.Drives == nil {
		c.Drives = []driveState{}
	}
	for _, n := range m.nics {
		c.NetworkInterfaces = append(c.NetworkInterfaces, n.netState)
	}
	return c
}

// parseLevel maps Firecracker's log levels (any case) to slog levels.
func parseLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case "off":
		return slog.LevelError + 100, true
	case "error":
		return slog.LevelError, true
	case "warning", "warn":
		return slog.LevelWarn, true
	case "info":
		return slog.LevelInfo, true
	case "debug":
		return slog.LevelDebug, true
	case "trace":
		return slog.LevelDebug - 4, true
	}
	return 0, false
}

// openLogFile opens a log or metrics file (or FIFO) for appending,
// creating it as Firecracker does.
func openLogFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// readable checks that path opens for reading.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// openable checks that path opens read-only, or read-write unless ro.
func openable(path string, ro bool) error {
	flag := os.O_RDWR
	if ro {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// errnoText renders an *os.PathError as Rust's io::Error does ("No such
// file or directory (os error 2)").
func errnoText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return fmt.Sprintf("%s (os error %d)", capitalize(en.Error()), int(en))
	}
	return err.Error()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// deserializeFault is the fault of a body Firecracker's serde rejects.
func deserializeFault(msg string) *apiFault {
	return fault("An error occurred when deserializing the json body of a request: %s.", msg)
}
