// Package fakevm holds the FAKES of Firecracker and of its jailer that
// kici's firecracker backend runs on hosts without KVM (CI, this project's
// VMs): cmd/fakes/firecracker and cmd/fakes/jailer, built by `make fakes`
// into bin/fakes/. They are named like the real binaries, take the real
// command lines, build the real jail and speak the real API, so the backend
// drives them exactly as it drives Firecracker; but no kernel boots. What
// is real and what is faked:
//
// # The jailer (JailerMain)
//
// Real: the command line (--id, --exec-file, --uid, --gid,
// --chroot-base-dir, --netns, --daemonize, --new-pid-ns, --cgroup-version,
// --cgroup, --parent-cgroup, --resource-limit, then "--" and firecracker's
// arguments) and its validation (the id is letters, digits and '-', 1..64
// characters; the exec file exists, is an executable regular file and, as
// older jailers required, its name contains "firecracker"). The jail:
// <chroot-base-dir>/<exec file name>/<id>/root, with a copy of the exec
// file at /<exec file name>, /dev/net/tun (10,200), /dev/kvm (10,232) and
// /dev/urandom (1,9) made with mknod, "/", /dev, /dev/net and /run made
// 0700, all owned by uid:gid; the no-file (default 2048) and fsize limits;
// joining --netns. With --new-pid-ns it starts firecracker, from its copy in
// the jail (so its comm is "firecracker"), as PID 1 of a new PID namespace,
// writes its host PID to <jail root>/<exec file name>.pid and exits 0; with
// --daemonize it starts it in a new session with /dev/null as stdio;
// otherwise it writes its own PID and execs in place. Firecracker gets --id,
// --start-time-us, --start-time-cpu-us and --parent-cpu-time-us before the
// arguments after "--".
//
// Faked: cgroups are validated and not created. The jailer does not
// pivot_root, chroot or drop privileges itself: it passes the jail root and
// uid:gid in the environment (KICI_FAKE_JAIL_ROOT, _UID, _GID), and the fake
// firecracker enters the jail itself once it started its guest helper,
// which needs root and the host's file system. It also passes
// KICI_FAKE_GUEST_AGENT, the guest agent binary: the jailer's own
// KICI_FAKE_GUEST_AGENT, else kici-agent in the directory above the
// jailer's (bin/kici-agent beside bin/fakes/), made absolute.
//
// # The VMM (FirecrackerMain, Machine)
//
// Real: the command line (unknown arguments exit 153 like Firecracker's
// parser), --config-file (configure and boot at once) with --no-api and
// --metadata, --log-path and --level, --http-api-max-payload-size and
// --mmds-size-limit. The API on --api-sock (default /run/firecracker.socket
// inside the jail; a stale socket is removed): GET / and /version,
// GET/PUT/PATCH /machine-config, PUT /boot-source (the kernel must open),
// PUT /drives/{id} (the backing file must open read-only or read-write as
// asked; one root drive) and PATCH /drives/{id} after boot, PUT
// /network-interfaces/{id} (opens the host TAP then, through /dev/net/tun
// with IFF_TAP|IFF_NO_PI, as Firecracker makes the device at this call),
// PUT /mmds/config (V1 or V2, link-local address, interfaces that exist),
// PUT/PATCH/GET /mmds (a JSON merge patch; size limit, 413), PUT /actions
// (InstanceStart, SendCtrlAltDel, FlushMetrics), PATCH /vm (Paused,
// Resumed), PUT /snapshot/create and /snapshot/load, PUT /logger and
// /metrics, GET /vm/config. The phase rules (pre-boot calls refused after
// InstanceStart, post-boot calls before it), the id checks, unknown JSON
// fields, empty or bodied requests and unknown paths are answered 400 with
// {"fault_message": ...} in Firecracker's words where they are known;
// successes are 204, GETs 200. See Machine for the state machine.
//
// Faked: the "guest". At start-up, while still root and not chrooted, the
// VMM starts its guest helper: the same binary again (through
// /proc/self/exe), named fc-guest (prctl PR_SET_NAME), in a network
// namespace of its own (CLONE_NEWNET), talking to the VMM over a unix
// socketpair. Then the VMM chroots into the jail, drops to uid:gid and
// serves the API. At InstanceStart the helper, standing in for the guest's
// kernel and init, brings lo up, makes a TAP eth0 (eth1... for more
// interfaces) with the guest_mac, configures the boot_args' ip=<client>::
// <gateway>:<netmask>::<dev>:off on it with a default route, puts the MMDS
// address (mmds-config's ipv4_address, default 169.254.169.254) on lo as a
// /32 and listens on its port 80, and passes the TAP and listener fds to the
// VMM (SCM_RIGHTS). The VMM relays frames between each host TAP and its
// guest TAP, so the guest's traffic really crosses the host TAP and
// bridge, and serves MMDS (V2 session tokens, 401 without one, JSON or
// the IMDS text form) from its current data store on the listener. Then
// the helper starts the guest agent, as root in that network namespace
// (but on the host's file system, outside the jail), in a session of its
// own, with KICI_AGENT_MMDS_URL=http://<mmds address>,
// KICI_AGENT_WORKDIR=<jail root>/guest/work, TMPDIR=<jail root>/guest/tmp,
// HOME=<jail root>/guest/home and a standard PATH, its stdout and stderr on
// the VMM's stdout (the serial console). When the agent exits, the VM
// powers off and the VMM exits 0, as Firecracker does after a guest
// reboot with reboot=k; a missing agent is a "Kernel panic - not syncing:
// No working init found." on the console and the same power-off.
// SendCtrlAltDel sends SIGTERM to the guest's processes and SIGKILL 3 s
// later (a paused VM gets it when resumed); Paused and Resumed send
// SIGSTOP and SIGCONT. Under --new-pid-ns
// the helper and the agent live in the VMM's PID namespace, whose init is
// the VMM, so killing the VMM (SIGKILL) kills the whole guest, as killing
// Firecracker kills a VM; otherwise they have a parent-death signal.
//
// Snapshots are faked too: the fake has no guest memory to keep. PUT
// /snapshot/create (paused VM only) writes the VM's configuration (and,
// for the record, the MMDS data) to snapshot_path and a stub to
// mem_file_path. PUT /snapshot/load (fresh VMM only) restores the
// configuration, applies network_overrides, restores the MMDS
// configuration but not its data (as Firecracker, so the host must PUT
// /mmds again), and leaves the VM paused; resume_vm, or a later Resumed,
// boots the guest fresh from that configuration. A failed load ends the
// process (exit 1) after its 400, as in Firecracker.
//
// Also faked or left out: no kernel, rootfs or drive content is read
// (files are only opened to check them); rate limiters, the boot timer,
// seccomp, PCI and the logger's module filter are accepted and ignored;
// balloon, vsock, entropy, pmem, serial, cpu-config, memory hotplug and
// device hot-(un)plug answer 400 "not implemented by the fake"; frames carry
// no virtio-net header (no IFF_VNET_HDR) and MMDS is reachable by any
// process of the guest, not only through the configured interface.
//
// # Use
//
// Only the fake binaries' mains, kici's tests and the firecracker backend's
// tests import this package. A *Machine is safe for concurrent use; the
// other types are used by one goroutine at a time.
package fakevm
