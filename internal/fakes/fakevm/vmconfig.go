package fakevm

import (
	"encoding/json"
	"net/netip"
)

// The request bodies of the API, with the field names and required fields
// of src/firecracker/swagger/firecracker.yaml. Firecracker rejects unknown
// fields (serde deny_unknown_fields), so every field the real one knows is
// listed here, including those the fake only stores. Required fields are
// pointers, so that a missing one can be told from a zero one.

// machineConfig is MachineConfiguration.
type machineConfig struct {
	VCPUCount       *int    `json:"vcpu_count"`
	MemSizeMib      *int    `json:"mem_size_mib"`
	SMT             *bool   `json:"smt,omitempty"`
	TrackDirtyPages *bool   `json:"track_dirty_pages,omitempty"`
	HugePages       *string `json:"huge_pages,omitempty"`
	CPUTemplate     *string `json:"cpu_template,omitempty"`
}

// bootSource is BootSource.
type bootSource struct {
	KernelImagePath *string `json:"kernel_image_path"`
	BootArgs        string  `json:"boot_args,omitempty"`
	InitrdPath      string  `json:"initrd_path,omitempty"`
}

// rateLimiter is RateLimiter, stored and never enforced.
type rateLimiter struct {
	Bandwidth *tokenBucket `json:"bandwidth,omitempty"`
	Ops       *tokenBucket `json:"ops,omitempty"`
}

// tokenBucket is TokenBucket.
type tokenBucket struct {
	OneTimeBurst *int64 `json:"one_time_burst,omitempty"`
	RefillTime   *int64 `json:"refill_time"`
	Size         *int64 `json:"size"`
}

// drive is Drive.
type drive struct {
	DriveID      *string      `json:"drive_id"`
	PartUUID     string       `json:"partuuid,omitempty"`
	IsRootDevice *bool        `json:"is_root_device"`
	CacheType    string       `json:"cache_type,omitempty"`
	IsReadOnly   *bool        `json:"is_read_only,omitempty"`
	PathOnHost   *string      `json:"path_on_host,omitempty"`
	RateLimiter  *rateLimiter `json:"rate_limiter,omitempty"`
	IOEngine     string       `json:"io_engine,omitempty"`
	Socket       *string      `json:"socket,omitempty"`
}

// partialDrive is PartialDrive, the body of PATCH /drives/{id}.
type partialDrive struct {
	DriveID     *string      `json:"drive_id"`
	PathOnHost  *string      `json:"path_on_host,omitempty"`
	RateLimiter *rateLimiter `json:"rate_limiter,omitempty"`
}

// networkInterface is NetworkInterface.
type networkInterface struct {
	IfaceID       *string      `json:"iface_id"`
	HostDevName   *string      `json:"host_dev_name"`
	GuestMAC      string       `json:"guest_mac,omitempty"`
	MTU           *int         `json:"mtu,omitempty"`
	RxRateLimiter *rateLimiter `json:"rx_rate_limiter,omitempty"`
	TxRateLimiter *rateLimiter `json:"tx_rate_limiter,omitempty"`
}

// partialNetworkInterface is PartialNetworkInterface (PATCH, post-boot).
type partialNetworkInterface struct {
	IfaceID       *string      `json:"iface_id"`
	RxRateLimiter *rateLimiter `json:"rx_rate_limiter,omitempty"`
	TxRateLimiter *rateLimiter `json:"tx_rate_limiter,omitempty"`
}

// mmdsConfig is MmdsConfig.
type mmdsConfig struct {
	Version           string    `json:"version,omitempty"`
	NetworkInterfaces *[]string `json:"network_interfaces"`
	IPv4Address       *string   `json:"ipv4_address,omitempty"`
	IMDSCompat        bool      `json:"imds_compat,omitempty"`
}

// loggerConfig is Logger.
type loggerConfig struct {
	Level         string `json:"level,omitempty"`
	LogPath       string `json:"log_path,omitempty"`
	ShowLevel     bool   `json:"show_level,omitempty"`
	ShowLogOrigin bool   `json:"show_log_origin,omitempty"`
	Module        string `json:"module,omitempty"`
}

// metricsConfig is Metrics.
type metricsConfig struct {
	MetricsPath *string           `json:"metrics_path"`
	EmitID      bool              `json:"emit_id,omitempty"`
	Properties  map[string]string `json:"properties,omitempty"`
}

// actionInfo is InstanceActionInfo.
type actionInfo struct {
	ActionType *string `json:"action_type"`
}

// vmStateBody is Vm, the body of PATCH /vm.
type vmStateBody struct {
	State *string `json:"state"`
}

// snapshotCreateParams is SnapshotCreateParams.
type snapshotCreateParams struct {
	MemFilePath  *string `json:"mem_file_path"`
	SnapshotPath *string `json:"snapshot_path"`
	SnapshotType string  `json:"snapshot_type,omitempty"`
}

// memoryBackend is MemoryBackend.
type memoryBackend struct {
	BackendType *string `json:"backend_type"`
	BackendPath *string `json:"backend_path"`
}

// networkOverride is NetworkOverride.
type networkOverride struct {
	IfaceID     *string `json:"iface_id"`
	HostDevName *string `json:"host_dev_name"`
}

// snapshotLoadParams is SnapshotLoadParams.
type snapshotLoadParams struct {
	EnableDiffSnapshots bool              `json:"enable_diff_snapshots,omitempty"`
	TrackDirtyPages     bool              `json:"track_dirty_pages,omitempty"`
	MemFilePath         *string           `json:"mem_file_path,omitempty"`
	MemBackend          *memoryBackend    `json:"mem_backend,omitempty"`
	SnapshotPath        *string           `json:"snapshot_path"`
	ResumeVM            bool              `json:"resume_vm,omitempty"`
	NetworkOverrides    []networkOverride `json:"network_overrides,omitempty"`
	VsockOverride       json.RawMessage   `json:"vsock_override,omitempty"`
	ClockRealtime       bool              `json:"clock_realtime,omitempty"`
	HugePages           string            `json:"huge_pages,omitempty"`
}

// fileConfig is the document of --config-file (Firecracker's VmmConfig,
// kebab-case keys). The devices the fake does not emulate are accepted
// when absent or null only.
type fileConfig struct {
	Balloon           json.RawMessage    `json:"balloon,omitempty"`
	Drives            []drive            `json:"drives"`
	BootSource        *bootSource        `json:"boot-source"`
	CPUConfig         json.RawMessage    `json:"cpu-config,omitempty"`
	Logger            *loggerConfig      `json:"logger,omitempty"`
	MachineConfig     *machineConfig     `json:"machine-config,omitempty"`
	Metrics           *metricsConfig     `json:"metrics,omitempty"`
	MMDSConfig        *mmdsConfig        `json:"mmds-config,omitempty"`
	NetworkInterfaces []networkInterface `json:"network-interfaces,omitempty"`
	Vsock             json.RawMessage    `json:"vsock,omitempty"`
	Entropy           json.RawMessage    `json:"entropy,omitempty"`
	Pmem              json.RawMessage    `json:"pmem,omitempty"`
	MemoryHotplug     json.RawMessage    `json:"memory-hotplug,omitempty"`
}

// The machine's own records of its configuration, in the shape GET
// /vm/config and the snapshot file use.

// driveState is a configured drive.
type driveState struct {
	DriveID      string `json:"drive_id"`
	PathOnHost   string `json:"path_on_host"`
	IsRootDevice bool   `json:"is_root_device"`
	IsReadOnly   bool   `json:"is_read_only"`
	PartUUID     string `json:"partuuid,omitempty"`
	CacheType    string `json:"cache_type"`
	IOEngine     string `json:"io_engine"`
}

// netState is a configured network interface.
type netState struct {
	IfaceID     string `json:"iface_id"`
	HostDevName string `json:"host_dev_name"`
	GuestMAC    string `json:"guest_mac,omitempty"`
	MTU         int    `json:"mtu,omitempty"`
}

// machineState is the machine configuration.
type machineState struct {
	VCPUCount       int    `json:"vcpu_count"`
	MemSizeMib      int    `json:"mem_size_mib"`
	SMT             bool   `json:"smt"`
	TrackDirtyPages bool   `json:"track_dirty_pages"`
	HugePages       string `json:"huge_pages"`
}

// bootState is the boot source.
type bootState struct {
	KernelImagePath string `json:"kernel_image_path"`
	BootArgs        string `json:"boot_args,omitempty"`
	InitrdPath      string `json:"initrd_path,omitempty"`
}

// mmdsState is the MMDS configuration.
type mmdsState struct {
	Version           string     `json:"version"`
	NetworkInterfaces []string   `json:"network_interfaces"`
	IPv4Address       netip.Addr `json:"ipv4_address"`
	IMDSCompat        bool       `json:"imds_compat"`
}

// vmConfig is the whole configuration, as GET /vm/config exports it.
type vmConfig struct {
	BootSource        *bootState   `json:"boot-source,omitempty"`
	Drives            []driveState `json:"drives"`
	MachineConfig     machineState `json:"machine-config"`
	MMDSConfig        *mmdsState   `json:"mmds-config,omitempty"`
	NetworkInterfaces []netState   `json:"network-interfaces"`
}
