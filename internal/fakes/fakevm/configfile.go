package fakevm

import (
	"context"
	"fmt"
	"os"
)

// ApplyConfigFile configures the machine from a --config-file document
// (Firecracker's VmmConfig: "boot-source", "drives", "machine-config",
// "network-interfaces", "mmds-config", "logger", "metrics"), puts the
// --metadata document (if any) into MMDS, and boots, as Firecracker does
// when started with --config-file. Devices the fake does not emulate
// (balloon, vsock, entropy, pmem, memory hotplug, cpu-config) must be
// absent or null.
func (m *Machine) ApplyConfigFile(ctx context.Context, doc, metadata []byte) error {
	var fc fileConfig
	if err := decodeBody(doc, &fc); err != nil {
		return err
	}
	for name, raw := range map[string][]byte{
		"balloon": fc.Balloon, "cpu-config": fc.CPUConfig, "vsock": fc.Vsock, "entropy": fc.Entropy,
		"pmem": fc.Pmem, "memory-hotplug": fc.MemoryHotplug,
	} {
		if len(raw) > 0 && string(raw) != "null" && string(raw) != "[]" {
			return fmt.Errorf("fake firecracker: %q in the config file is not implemented by the fake", name)
		}
	}
	if fc.BootSource == nil {
		return deserializeFault("missing field `boot-source`")
	}
	if fc.Logger != nil {
		if err := m.putLogger(*fc.Logger); err != nil {
			return err
		}
	}
	if fc.Metrics != nil {
		if err := m.putMetrics(*fc.Metrics); err != nil {
			return err
		}
	}
	if fc.MachineConfig != nil {
		if err := m.putMachineConfig(*fc.MachineConfig); err != nil {
			return err
		}
	}
	if err := m.putBootSource(*fc.BootSource); err != nil {
		return err
	}
	for _, d := range fc.Drives {
		if d.DriveID == nil {
			return deserializeFault("missing field `drive_id`")
		}
		if err := m.putDrive(d); err != nil {
			return err
		}
	}
	for _, n := range fc.NetworkInterfaces {
		if n.IfaceID == nil {
			return deserializeFault("missing field `iface_id`")
		}
		if err := m.putNetworkInterface(n); err != nil {
			return err
		}
	}
	if fc.MMDSConfig != nil {
		if err := m.putMMDSConfig(*fc.MMDSConfig); err != nil {
			return err
		}
	}
	if len(metadata) > 0 {
		v, err := decodeAny(metadata)
		if err != nil {
			return err
		}
		if err := m.putMMDS(v); err != nil {
			return err
		}
	}
	return m.start(ctx)
}

// readConfigFiles reads --config-file and --metadata (each may be empty).
func readConfigFiles(configFile, metadata string) (doc, meta []byte, err error) {
	if configFile != "" {
		if doc, err = os.ReadFile(configFile); err != nil {
			return nil, nil, fmt.Errorf("Unable to open or read from the configuration file: %s", errnoText(err))
		}
	}
	if metadata != "" {
		if meta, err = os.ReadFile(metadata); err != nil {
			return nil, nil, fmt.Errorf("Unable to open or read from the mmds content file: %s", errnoText(err))
		}
	}
	return doc, meta, nil
}
