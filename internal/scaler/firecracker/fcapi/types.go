package fcapi

// InstanceInfo is the answer of GET /.
type InstanceInfo struct {
	// ID is the instance id (the jailer's --id).
	ID string `json:"id"`
	// State is StateNotStarted, StateRunning or StatePaused.
	State string `json:"state"`
	// VMMVersion is the Firecracker version.
	VMMVersion string `json:"vmm_version"`
	// AppName is "Firecracker".
	AppName string `json:"app_name"`
}

// States of InstanceInfo.State.
const (
	StateNotStarted = "Not started"
	StateRunning    = "Running"
	StatePaused     = "Paused"
)

// MachineConfig is the body of PUT /machine-config (pre-boot). Firecracker
// defaults to 1 vCPU and 128 MiB.
type MachineConfig struct {
	// VCPUCount is 1..32; with SMT it must be 1 or even.
	VCPUCount int `json:"vcpu_count"`
	// MemSizeMib is the guest memory in MiB.
	MemSizeMib int `json:"mem_size_mib"`
	// SMT enables simultaneous multithreading (x86_64 only).
	SMT bool `json:"smt"`
}

// BootSource is the body of PUT /boot-source (pre-boot). The kernel's path
// is seen from inside the jail.
type BootSource struct {
	KernelImagePath string `json:"kernel_image_path"`
	// BootArgs is the kernel command line; empty means Firecracker's
	// default.
	BootArgs string `json:"boot_args,omitempty"`
}

// Drive is the body of PUT /drives/{drive_id} (pre-boot), a virtio-block
// device backed by a file seen from inside the jail.
type Drive struct {
	// DriveID names the drive (letters, digits and underscores); it is also
	// the last element of the request path.
	DriveID      string `json:"drive_id"`
	PathOnHost   string `json:"path_on_host"`
	IsRootDevice bool   `json:"is_root_device"`
	IsReadOnly   bool   `json:"is_read_only"`
}

// NetworkInterface is the body of PUT /network-interfaces/{iface_id}
// (pre-boot): a virtio-net device backed by a host TAP.
type NetworkInterface struct {
	// IfaceID names the interface; it is also the last element of the
	// request path.
	IfaceID string `json:"iface_id"`
	// HostDevName is the name of the TAP on the host.
	HostDevName string `json:"host_dev_name"`
	// GuestMAC is the guest's MAC address, e.g. 06:00:AC:10:00:02; empty
	// lets Firecracker leave it to the guest.
	GuestMAC string `json:"guest_mac,omitempty"`
}

// MMDSConfig is the body of PUT /mmds/config (pre-boot).
type MMDSConfig struct {
	// Version is MMDSVersion2 or "V1"; empty means V1, Firecracker's
	// deprecated default, so kici always sets it.
	Version string `json:"version,omitempty"`
	// NetworkInterfaces lists the iface ids through which the guest reaches
	// MMDS; each must be configured already.
	NetworkInterfaces []string `json:"network_interfaces"`
	// IPv4Address is the link-local address of MMDS; empty means
	// 169.254.169.254.
	IPv4Address string `json:"ipv4_address,omitempty"`
}

// MMDSVersion2 is MMDSConfig.Version for the session-token protocol.
const MMDSVersion2 = "V2"

// ActionType is the action_type of PUT /actions.
type ActionType string

// Actions.
const (
	// InstanceStart boots the configured VM.
	InstanceStart ActionType = "InstanceStart"
	// SendCtrlAltDel asks the guest to reboot, which with reboot=k ends
	// the Firecracker process (x86_64 only).
	SendCtrlAltDel ActionType = "SendCtrlAltDel"
	// FlushMetrics writes the metrics now (post-boot only).
	FlushMetrics ActionType = "FlushMetrics"
)

// VMState is the state of PATCH /vm.
type VMState string

// VM states.
const (
	VMPaused  VMState = "Paused"
	VMResumed VMState = "Resumed"
)

// SnapshotCreate is the body of PUT /snapshot/create (post-boot, paused VM
// only). Paths are seen from inside the jail.
type SnapshotCreate struct {
	// SnapshotType is "Full" (the default when empty) or "Diff".
	SnapshotType string `json:"snapshot_type,omitempty"`
	SnapshotPath string `json:"snapshot_path"`
	MemFilePath  string `json:"mem_file_path"`
}

// SnapshotLoad is the body of PUT /snapshot/load, allowed only in a fresh
// process that was configured with nothing but a logger and metrics.
type SnapshotLoad struct {
	SnapshotPath string      `json:"snapshot_path"`
	MemBackend   *MemBackend `json:"mem_backend,omitempty"`
	// ResumeVM resumes the VM after the load; otherwise it stays paused.
	ResumeVM bool `json:"resume_vm,omitempty"`
	// NetworkOverrides moves interfaces of the snapshot to other TAPs.
	NetworkOverrides []NetworkOverride `json:"network_overrides,omitempty"`
}

// MemBackend says where the guest memory of a snapshot comes from.
type MemBackend struct {
	// BackendType is "File" or "Uffd".
	BackendType string `json:"backend_type"`
	// BackendPath is the memory file (File) or the UDS of a page-fault
	// handler (Uffd).
	BackendPath string `json:"backend_path"`
}

// NetworkOverride gives a snapshot's interface another host TAP.
type NetworkOverride struct {
	IfaceID     string `json:"iface_id"`
	HostDevName string `json:"host_dev_name"`
}

// actionBody is the body of PUT /actions.
type actionBody struct {
	ActionType ActionType `json:"action_type"`
}

// vmBody is the body of PATCH /vm.
type vmBody struct {
	State VMState `json:"state"`
}

// faultBody is the body of an error answer.
type faultBody struct {
	FaultMessage string `json:"fault_message"`
}
