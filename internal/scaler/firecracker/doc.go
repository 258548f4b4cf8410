// Package firecracker is the scaler backend that runs each agent in a
// one-shot Firecracker microVM started through the jailer.
//
// One spawn, in order (docs/scaler.md § Firecracker has the picture):
//
//  1. the host checks of the spawn (KVM, /dev/net/tun, the binaries, the
//     kernel and rootfs, free space on the chroot volume); a missing piece
//     refuses the spawn (scaler.DeterministicSpawnError) naming it;
//  2. an address of the bridge's pool, leased in the store before anything
//     exists on the host, so an orphan sweep can tell a spawn in progress
//     from a leftover;
//  3. the TAP kici-<last 8 hex of the VM id>, owned by the jailer's uid,
//     enslaved to the bridge with port isolation, and the VM's rules at the
//     head of the bridge's nftables forward chain, keyed by its address;
//  4. the VM directory <chrootBaseDir>/firecracker/<id>/ with the jail root
//     root/ holding the kernel and rootfs (hard links, copies across
//     filesystems or when the jailer's uid could not read them) and the
//     overlay drive, a sparse copy of a pre-formatted template;
//  5. the jailer (--new-pid-ns, --cgroup-version 2), whose VMM serves its
//     API on root/run/firecracker.socket; the backend configures the VM
//     over that API (machine, kernel and boot arguments with the guest's
//     ip=, rootfs read-only, overlay read-write, eth0 on the TAP, MMDS v2
//     with the agent's configuration) and starts it.
//
// The guest's kici-agent reads MMDS (KICI_AGENT_MMDS_URL) and registers;
// MarkRegistered then empties MMDS, so job code cannot read the token.
// Teardown asks the guest to stop (SendCtrlAltDel), kills the VMM after a
// grace only once its identity is confirmed (package vmproc), then removes
// the VM directory, the TAP, the rules and the lease, in that order, each
// step idempotent.
//
// Host is shared by every firecracker backend of a process: the bridge,
// the nftables table, the address pool, the overlay templates and the set
// of VMs some backend tracks, which every orphan sweep spares.
//
// Backend and Host are safe for concurrent use.
package firecracker
