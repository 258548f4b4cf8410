#!/bin/sh
# /init of a kici Firecracker guest: PID 1 of the microVM.
#
# `scripts/firecracker-host.sh guest` installs this file as /init of the
# rootfs it builds; any rootfs whose /init does the same works (see
# docs/scaler.md, section "Firecracker"). kici boots the guest with
#
#   console=ttyS0 reboot=k panic=1 pci=off random.trust_cpu=on init=/init
#   ip=<guest>::<gateway>:<netmask>::eth0:off
#
# with the rootfs read-only on /dev/vda and an empty, pre-formatted ext4
# overlay drive on /dev/vdb. This script:
#
#   1. mounts /proc, /sys, /dev, /tmp and /run (the rootfs is read-only);
#   2. brings lo up, checks that eth0 has the ip= address (and sets it from
#      the kernel command line if the kernel did not), adds the route to the
#      metadata service (MMDS) through eth0 and writes /run/resolv.conf;
#   3. mounts the overlay drive on /kici: the agent's work dir, HOME and
#      TMPDIR live there;
#   4. runs kici-agent with KICI_AGENT_MMDS_URL, from which the agent reads
#      its id, token, labels and orchestrator URL;
#   5. powers the VM off when the agent exits (reboot -f; with reboot=k the
#      VMM then exits). Ctrl-Alt-Del from the host (kici's polite stop)
#      reaches PID 1 as SIGINT and is passed to the agent as SIGTERM.
#
# Should anything here fail, PID 1 exits, the kernel panics and panic=1
# reboots, which also ends the VM: a guest never outlives a broken init.
#
# Settings: /etc/kici-guest.env (sourced if present) may set
#   KICI_GUEST_DNS      nameservers for /run/resolv.conf, space-separated
#                       (default 1.1.1.1; private and link-local ranges are
#                       dropped by the VM's nftables rules on the host, so
#                       a LAN resolver is not reachable)
#   KICI_GUEST_HOSTNAME the guest's host name (default kici-guest)
#
# POSIX sh: the guest's /bin/sh may be dash or BusyBox.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

agent=/usr/local/bin/kici-agent
work=/kici
mmds=169.254.169.254

log() { echo "kici-init: $*"; }

# poweroff ends the VM: reboot(2) through reboot -f, which both BusyBox
# and systemd's reboot do without an init system; should that fail, PID 1
# returns and the kernel's panic=1 reboots, which ends the VM as well.
poweroff() {
	sync
	umount "$work" 2>/dev/null
	reboot -f
	sleep 5
	exit "${1:-1}"
}

# mounted DIR succeeds if DIR is a mount point (the kernel may have
# mounted devtmpfs on /dev already).
mounted() {
	[ -r /proc/mounts ] || return 1
	while read -r _ dir _; do
		[ "$dir" = "$1" ] && return 0
	done </proc/mounts
	return 1
}

# mnt TYPE DIR [OPTIONS] mounts a pseudo file system unless DIR is one.
mnt() {
	mounted "$2" && return 0
	mkdir -p "$2" 2>/dev/null
	mount -t "$1" -o "${3:-defaults}" "$1" "$2"
}

# prefixlen NETMASK prints the prefix length of a dotted netmask.
prefixlen() {
	n=0
	old_ifs=$IFS
	IFS=.
	# shellcheck disable=SC2086 # splitting the netmask at dots is the point
	set -- $1
	IFS=$old_ifs
	for octet in "$@"; do
		case $octet in
		255) n=$((n + 8)) ;;
		254) n=$((n + 7)) ;;
		252) n=$((n + 6)) ;;
		248) n=$((n + 5)) ;;
		240) n=$((n + 4)) ;;
		224) n=$((n + 3)) ;;
		192) n=$((n + 2)) ;;
		128) n=$((n + 1)) ;;
		esac
	done
	echo "$n"
}

# network sets up lo, eth0 (from ip= when the kernel left it bare), the
# MMDS route and the resolver.
network() {
	ip link set lo up
	if ! ip -4 addr show dev eth0 | grep -q 'inet '; then
		# ip=<client>:<server>:<gateway>:<netmask>:<host>:<device>:<autoconf>
		read -r cmdline </proc/cmdline
		for arg in $cmdline; do
			case $arg in
			ip=*) spec=${arg#ip=} ;;
			esac
		done
		if [ -z "${spec:-}" ]; then
			log "eth0 has no address and the kernel command line has no ip="
			return 1
		fi
		old_ifs=$IFS
		IFS=:
		# shellcheck disable=SC2086 # splitting ip= at colons is the point
		set -- $spec
		IFS=$old_ifs
		log "the kernel did not configure eth0; setting $1/$(prefixlen "$4") via $3"
		ip link set eth0 up &&
			ip addr add "$1/$(prefixlen "$4")" dev eth0 &&
			ip route add default via "$3" dev eth0 || return 1
	fi
	ip link set eth0 up
	# MMDS answers on eth0 only; the guest must route its address there.
	ip route replace "$mmds/32" dev eth0 || return 1
	: >/run/resolv.conf
	for ns in ${KICI_GUEST_DNS:-1.1.1.1}; do
		echo "nameserver $ns" >>/run/resolv.conf
	done
}

# shellcheck source=/dev/null # written into the rootfs by firecracker-host.sh guest
[ -r /etc/kici-guest.env ] && . /etc/kici-guest.env

mnt proc /proc nosuid,nodev,noexec || poweroff 1
mnt sysfs /sys nosuid,nodev,noexec || poweroff 1
mnt devtmpfs /dev nosuid,mode=0755 || poweroff 1
# The kernel opens /dev/console for PID 1 only if the rootfs has one; now
# that /dev is mounted, make sure the console (the host's serial.log) gets
# everything said from here on.
exec </dev/null >/dev/console 2>&1
mnt devpts /dev/pts nosuid,noexec,gid=5,mode=0620
mnt tmpfs /dev/shm nosuid,nodev,mode=1777
mnt tmpfs /tmp nosuid,nodev,mode=1777 || poweroff 1
mnt tmpfs /run nosuid,nodev,mode=0755 || poweroff 1
mnt cgroup2 /sys/fs/cgroup nosuid,nodev,noexec
hostname "${KICI_GUEST_HOSTNAME:-kici-guest}" 2>/dev/null

network || {
	log "network setup failed"
	poweroff 1
}

# The overlay drive is pre-formatted ext4 and empty: no mkfs here.
mkdir -p "$work" 2>/dev/null
if ! mount -t ext4 -o nodev /dev/vdb "$work"; then
	log "cannot mount the overlay drive /dev/vdb on $work"
	poweroff 1
fi
mkdir -p "$work/agent" "$work/home" "$work/tmp"
chmod 1777 "$work/tmp"

if [ ! -x "$agent" ]; then
	log "$agent is missing or not executable"
	poweroff 1
fi

log "starting $agent"
KICI_AGENT_MMDS_URL="http://$mmds" \
	KICI_AGENT_WORKDIR="$work/agent" \
	HOME="$work/home" \
	TMPDIR="$work/tmp" \
	"$agent" &
agent_pid=$!

# Ctrl-Alt-Del arrives as SIGINT: ask the agent to stop; the wait below
# then sees it exit.
trap 'kill -TERM "$agent_pid" 2>/dev/null' INT TERM

status=0
wait "$agent_pid" || status=$?
while kill -0 "$agent_pid" 2>/dev/null; do
	status=0
	wait "$agent_pid" || status=$?
done
log "kici-agent exited with status $status; powering off"
poweroff "$status"
