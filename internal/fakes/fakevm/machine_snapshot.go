package fakevm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

// snapshotMagic marks a snapshot file of the fake.
const snapshotMagic = "kici-fake-firecracker-snapshot/v1"

// snapshotFile is what PUT /snapshot/create writes to snapshot_path: the
// VM's configuration (and, for the record, its MMDS data store). It is not
// Firecracker's format, and the fake holds no guest memory: the memory
// file is a stub, and a restored VM boots its guest fresh from the saved
// configuration. As in Firecracker, the MMDS configuration is restored
// and the MMDS data is not (the host must PUT /mmds again after a load).
type snapshotFile struct {
	Magic      string   `json:"magic"`
	VMMVersion string   `json:"vmm_version"`
	ID         string   `json:"id"`
	Config     vmConfig `json:"config"`
	// MMDSData is the data store at the snapshot; a load ignores it.
	MMDSData any `json:"mmds_data,omitempty"`
}

// memStub is the content of the memory file.
const memStub = "kici fake firecracker: no guest memory is saved; a load boots the guest fresh.\n"

// createSnapshot is PUT /snapshot/create: post-boot, and the VM paused.
func (m *Machine) createSnapshot(p snapshotCreateParams) error {
	if p.SnapshotPath == nil {
		return deserializeFault("missing field `snapshot_path`")
	}
	if p.MemFilePath == nil {
		return deserializeFault("missing field `mem_file_path`")
	}
	if t := orDefault(p.SnapshotType, "Full"); t != "Full" && t != "Diff" {
		return deserializeFault(fmt.Sprintf("unknown variant `%s`, expected `Full` or `Diff`", t))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == stateNotStarted {
		return fault(msgPreBoot)
	}
	if m.state != statePaused {
		return fault("Create snapshot error: Cannot save the microVM state: Vcpu is in unexpected state.")
	}
	snap := snapshotFile{Magic: snapshotMagic, VMMVersion: Version, ID: m.cfg.ID, Config: m.vmConfigLocked(), MMDSData: m.store.document()}
	if snap.Config.BootSource == nil {
		snap.Config.BootSource = m.restoredBoot
	}
	b, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		return fault("Create snapshot error: Cannot serialize the microVM state: %v", err)
	}
	if err := os.WriteFile(m.resolve(*p.SnapshotPath), b, 0o600); err != nil {
		return fault("Create snapshot error: Cannot perform open on the snapshot backing file: %v", errnoText(err))
	}
	if err := os.WriteFile(m.resolve(*p.MemFilePath), []byte(memStub), 0o600); err != nil {
		return fault("Create snapshot error: Cannot perform open on the memory backing file: %v", errnoText(err))
	}
	return nil
}

// loadSnapshot is PUT /snapshot/load: only in a fresh VMM (nothing but a
// logger and metrics configured). A load that fails past those checks ends
// the process (Done closes with exit code 1), as in Firecracker.
func (m *Machine) loadSnapshot(ctx context.Context, p snapshotLoadParams) error {
	if p.SnapshotPath == nil {
		return deserializeFault("missing field `snapshot_path`")
	}
	switch {
	case p.MemBackend != nil && p.MemFilePath != nil:
		return deserializeFault("too many fields: either `mem_backend` or `mem_file_path` exclusively is required")
	case p.MemBackend == nil && p.MemFilePath == nil:
		return deserializeFault("missing field: either `mem_backend` or `mem_file_path` is required")
	}
	memType, memPath := "File", ""
	if p.MemBackend != nil {
		if p.MemBackend.BackendType == nil || p.MemBackend.BackendPath == nil {
			return deserializeFault("missing field `backend_type` or `backend_path`")
		}
		memType, memPath = *p.MemBackend.BackendType, *p.MemBackend.BackendPath
		if memType != "File" && memType != "Uffd" {
			return deserializeFault(fmt.Sprintf("unknown variant `%s`, expected `File` or `Uffd`", memType))
		}
	} else {
		memPath = *p.MemFilePath
	}
	for _, o := range p.NetworkOverrides {
		if o.IfaceID == nil || o.HostDevName == nil {
			return deserializeFault("missing field `iface_id` or `host_dev_name`")
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateNotStarted {
		return fault(msgPostBoot)
	}
	if m.bootPath {
		return fault("Load snapshot error: Loading a microVM snapshot not allowed after configuring boot-specific resources.")
	}
	if err := m.restoreLocked(ctx, *p.SnapshotPath, memType, memPath, p); err != nil {
		m.log.Error("the snapshot load failed; the vmm exits", "err", err)
		m.end(ExitGenericError)
		return fault("Load snapshot error: %v", err)
	}
	return nil
}

// restoreLocked applies a snapshot file and, with resume_vm, boots.
func (m *Machine) restoreLocked(ctx context.Context, path, memType, memPath string, p snapshotLoadParams) error {
	b, err := os.ReadFile(m.resolve(path))
	if err != nil {
		return fmt.Errorf("Failed to restore from snapshot: Failed to get snapshot state from file: Failed to open snapshot file: %s", errnoText(err))
	}
	var snap snapshotFile
	if err := json.Unmarshal(b, &snap); err != nil || snap.Magic != snapshotMagic {
		return fmt.Errorf("Failed to restore from snapshot: Failed to get snapshot state from file: Failed to load snapshot state from file: not a snapshot of this (fake) Firecracker")
	}
	if memType == "Uffd" {
		return fmt.Errorf("Failed to restore from snapshot: Failed to load guest memory: fake firecracker: the Uffd memory backend is not implemented")
	}
	if err := readable(m.resolve(memPath)); err != nil {
		return fmt.Errorf("Failed to restore from snapshot: Failed to load guest memory: Error creating guest memory from file: %s", errnoText(err))
	}
	nets := slices.Clone(snap.Config.NetworkInterfaces)
	for _, o := range p.NetworkOverrides {
		i := slices.IndexFunc(nets, func(n netState) bool { return n.IfaceID == *o.IfaceID })
		if i < 0 {
			return fmt.Errorf("Failed to restore from snapshot: Failed to get snapshot state from file: Unknown Network Device.")
		}
		nets[i].HostDevName = *o.HostDevName
	}
	m.machine = snap.Config.MachineConfig
	m.machine.TrackDirtyPages = p.TrackDirtyPages || p.EnableDiffSnapshots
	for _, d := range snap.Config.Drives {
		if err := openable(m.resolve(d.PathOnHost), d.IsReadOnly); err != nil {
			return fmt.Errorf("Failed to restore from snapshot: Failed to build microVM from snapshot: Cannot restore devices: block device %q: %s", d.DriveID, errnoText(err))
		}
	}
	m.drives = snap.Config.Drives
	for _, n := range nets {
		if err := m.addNICLocked(n); err != nil {
			return fmt.Errorf("Failed to restore from snapshot: Failed to build microVM from snapshot: Cannot restore devices: %v", err)
		}
	}
	if mc := snap.Config.MMDSConfig; mc != nil {
		m.mmdsCfg = mc
		m.store.configure(mc.Version, mc.IMDSCompat)
		m.mmdsCreated = true
	}
	// GET /vm/config of a restored VM has no boot source; the fake keeps
	// the snapshot's to boot its guest.
	m.restoredBoot = snap.Config.BootSource
	if m.restoredBoot == nil {
		m.restoredBoot = &bootState{}
	}
	m.restored = true
	m.state = statePaused
	if p.ResumeVM {
		if err := m.bootGuestLocked(ctx, m.restoredBoot); err != nil {
			return fmt.Errorf("Failed to resume microVM: %v", err)
		}
		m.state = stateRunning
	}
	return nil
}
