#!/usr/bin/env bash
# firecracker-host.sh prepares a KVM host for kici's firecracker scalers:
# it checks the host, installs Firecracker's release binaries, builds a
# guest kernel and rootfs that start kici-agent, and prints a scalers.yaml.
# docs/scaler.md ("Firecracker", "Running it on real hardware") walks
# through it. Every command but check and config downloads or writes only
# what its own description says; check and config change nothing.
#
# This script is for an operator on a real KVM host with internet access;
# kici's CI does not run it (CI uses the named fakes, `make fakes`).

set -euo pipefail

# The Firecracker release `install` fetches (a tag of
# github.com/firecracker-microvm/firecracker, or "latest").
FIRECRACKER_VERSION="${FIRECRACKER_VERSION:-v1.16.1}"

RELEASES_URL="https://github.com/firecracker-microvm/firecracker/releases"
# The bucket of Firecracker's CI images, which its getting-started guide
# takes the guest kernel and the Ubuntu rootfs from.
CI_BUCKET_URL="https://s3.amazonaws.com/spec.ccfc.min"

# Defaults shared by the commands; each has an option to change it.
BIN_DIR=/usr/local/bin
GUEST_DIR=/var/lib/kici/firecracker
CHROOT_BASE=/srv/jailer
JAILER_UID=10000
JAILER_GID=10000
MIN_FREE_BYTES=$((1 << 30)) # kici refuses spawns below this (the disk guard)

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROG="$(basename "$0")"

usage() {
	cat <<EOF
Usage: $PROG COMMAND [OPTIONS]

Prepare this KVM host for kici's firecracker scalers (see docs/scaler.md).

Commands:
  check     Report what the host has and lacks: KVM, /dev/net/tun, cgroup v2,
            the binaries, the tools, the chroot base, the guest files. Changes
            nothing. Exits 1 if a spawn would be refused (a FAIL line).
              --bin-dir DIR       where firecracker and jailer are ($BIN_DIR)
              --chroot-base DIR   the scaler's chrootBaseDir ($CHROOT_BASE)
              --guest-dir DIR     where the guest files are ($GUEST_DIR)

  install   Download the Firecracker release for this host's architecture from
            GitHub, check its SHA-256, and install firecracker and jailer into
            the bin dir (as regular files: the jail is named after the file).
              --version TAG       release tag or "latest" ($FIRECRACKER_VERSION;
                                  or set FIRECRACKER_VERSION)
              --bin-dir DIR       install there ($BIN_DIR)
              --skip-checksum     do not check the tarball's .sha256.txt

  guest     Build the guest for kici in the guest dir: vmlinux (the kernel) and
            rootfs.ext4 (an ext4 image with kici-agent and an /init that runs
            it). Without --kernel or --rootfs, downloads the kernel and Ubuntu
            rootfs that Firecracker's getting-started guide uses. Needs root
            (it loop-mounts the image).
              --agent PATH        the kici-agent binary to install (required;
                                  \`make build\` makes a static one)
              --kernel PATH       use this uncompressed kernel instead
              --rootfs PATH       use this ext4 image as the base instead
              --out DIR           write the files there ($GUEST_DIR)
              --size SIZE         size of an image built from the download (2G)
              --dns "ADDR..."     the guest's nameservers (1.1.1.1; LAN and
                                  link-local addresses are not reachable)
              --init PATH         the guest's init ($SCRIPT_DIR/firecracker-rootfs-init.sh)
              --ci-prefix PREFIX  the CI bucket folder to download from, such as
                                  firecracker-ci/20250101-abcdef/ (the newest)
              --force             replace existing vmlinux and rootfs.ext4

  config    Print a scalers.yaml for this host to standard output.
              --name NAME         the scaler's name (microvms)
              --labels A,B        its label set (linux,microvm)
              --max-agents N      maxAgents (4)
              --vcpus N           vcpuCount (2)
              --mem MIB           memSizeMib (2048)
              --overlay MIB       overlayDriveSizeMib (4096)
              --bin-dir DIR       where firecracker and jailer are ($BIN_DIR)
              --guest-dir DIR     where vmlinux and rootfs.ext4 are ($GUEST_DIR)
              --chroot-base DIR   chrootBaseDir ($CHROOT_BASE)
              --uid N --gid N     the jailer's identity ($JAILER_UID:$JAILER_GID)
              --cidr CIDR         the guests' pool (10.0.0.0/24)
              --bridge NAME       the bridge (kici-br0)

  help      Show this text.

Examples:
  sudo $PROG check
  sudo $PROG install --version v1.16.1
  sudo $PROG guest --agent bin/kici-agent
  $PROG config > /etc/kici/scalers.yaml
EOF
}

die() {
	echo "$PROG: $*" >&2
	exit 1
}

# need_value OPTION ARGC: an option that takes a value got one.
need_value() {
	[ "$2" -ge 2 ] || die "$1 needs a value (see $PROG help)"
}

need_tools() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || die "$t is not installed; it is needed here"
	done
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "$1 needs root; run it with sudo"
}

# host_arch prints the architecture as Firecracker's releases name it.
host_arch() {
	local m
	m="$(uname -m)"
	case "$m" in
	x86_64 | aarch64) echo "$m" ;;
	*) die "architecture $m: Firecracker runs on x86_64 and aarch64 only" ;;
	esac
}

# ---------------------------------------------------------------- check

FAILED=0
ok() { printf 'ok    %s\n' "$*"; }
warn() { printf 'warn  %s\n' "$*"; }
fail() {
	printf 'FAIL  %s\n' "$*"
	FAILED=1
}

# opens_rw PATH succeeds if PATH can be opened for reading and writing.
opens_rw() {
	{ : <>"$1"; } 2>/dev/null
}

check_device() {
	local name=$1 path=$2 fix=$3
	if [ ! -c "$path" ]; then
		fail "$name: $path does not exist ($fix)"
	elif ! opens_rw "$path"; then
		fail "$name: $path cannot be opened read-write by $(id -un) ($fix)"
	else
		ok "$name: $path opens read-write"
	fi
}

check_cgroup() {
	local dir
	if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
		ok "cgroup v2: /sys/fs/cgroup is the unified hierarchy"
		return
	fi
	dir="$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)"
	if [ -n "$dir" ]; then
		warn "cgroup v2: only a hybrid hierarchy (cgroup2 at $dir): the jailer can use it, kici's own check warns (boot with systemd.unified_cgroup_hierarchy=1 for a unified one)"
	else
		fail "cgroup v2: no cgroup2 file system is mounted, and the jailer, which kici starts with --cgroup-version 2, refuses to run without one (boot with systemd.unified_cgroup_hierarchy=1)"
	fi
}

# version_of BINARY prints the version its --version reports, e.g. v1.16.1.
version_of() {
	"$1" --version 2>/dev/null | head -n 1 | grep -o 'v[0-9][0-9.]*' | head -n 1
}

check_binaries() {
	local fc="$BIN_DIR/firecracker" jailer="$BIN_DIR/jailer" fv jv
	if [ -L "$fc" ]; then
		fail "firecracker: $fc is a symlink (to $(readlink "$fc")); the jailer names each jail after the resolved file name and kici looks for <chrootBaseDir>/firecracker/: install a regular file ($PROG install)"
	elif [ -f "$fc" ] && [ -x "$fc" ]; then
		fv="$(version_of "$fc")"
		ok "firecracker: $fc ${fv:-(version unknown)}"
	else
		fail "firecracker: $fc is missing or not executable ($PROG install)"
	fi
	if [ -f "$jailer" ] && [ -x "$jailer" ]; then
		jv="$(version_of "$jailer")"
		ok "jailer: $jailer ${jv:-(version unknown)}"
	else
		fail "jailer: $jailer is missing or not executable ($PROG install)"
	fi
	if [ -n "${fv:-}" ] && [ -n "${jv:-}" ] && [ "$fv" != "$jv" ]; then
		fail "firecracker $fv and jailer $jv differ: the jailer needs the firecracker of its own release"
	fi
}

check_tools() {
	local t
	for t in mkfs.ext4 cp; do
		if command -v "$t" >/dev/null 2>&1; then
			ok "tool: $t ($(command -v "$t"))"
		else
			fail "tool: $t is missing (kici formats and copies the overlay drives with it; install e2fsprogs and coreutils)"
		fi
	done
}

# nearest_dir PATH prints PATH or its nearest existing parent.
nearest_dir() {
	local p=$1
	while [ ! -d "$p" ]; do
		p="$(dirname "$p")"
	done
	echo "$p"
}

check_chroot_base() {
	local dir opts free
	dir="$(nearest_dir "$CHROOT_BASE")"
	opts="$(findmnt -n -o OPTIONS --target "$dir" 2>/dev/null || true)"
	case ",$opts," in
	*,noexec,* | *,nodev,*)
		fail "chroot base: $CHROOT_BASE is on a file system mounted $opts: the jailer runs firecracker from the jail and makes device nodes there, so it needs exec and dev"
		;;
	*)
		ok "chroot base: $CHROOT_BASE (file system of $dir allows exec and device nodes)"
		;;
	esac
	free="$(df -P -B1 "$dir" | awk 'NR == 2 { print $4 }')"
	if [ -n "$free" ] && [ "$free" -lt "$MIN_FREE_BYTES" ]; then
		fail "chroot base: $((free >> 20)) MiB free on the volume of $dir; kici refuses spawns below 1024 MiB"
	elif [ -n "$free" ]; then
		ok "chroot base: $((free >> 20)) MiB free on the volume of $dir"
	fi
}

check_guest_files() {
	local f base_dev
	base_dev="$(stat -c %d "$(nearest_dir "$CHROOT_BASE")")"
	for f in "$GUEST_DIR/vmlinux" "$GUEST_DIR/rootfs.ext4"; do
		if [ ! -f "$f" ]; then
			warn "guest: $f is missing ($PROG guest --agent PATH builds it)"
			continue
		fi
		if [ "$(stat -c %d "$f")" != "$base_dev" ]; then
			warn "guest: $f is on another file system than $CHROOT_BASE: each spawn copies it instead of hard-linking it"
		elif [ $((0$(stat -c %a "$f") & 4)) -eq 0 ]; then
			warn "guest: $f is not readable by everyone: each spawn copies it instead of hard-linking it (chmod 0644)"
		else
			ok "guest: $f ($(stat -c %s "$f") bytes)"
		fi
	done
}

check_forward_policy() {
	if ! command -v iptables >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
		return
	fi
	if iptables -S FORWARD 2>/dev/null | grep -qx -- '-P FORWARD DROP'; then
		warn "iptables: the FORWARD policy is DROP (Docker sets it), which drops guest traffic whatever kici's table accepts; allow the pool, e.g. iptables -I DOCKER-USER -s 10.0.0.0/24 -j ACCEPT and iptables -I DOCKER-USER -d 10.0.0.0/24 -j ACCEPT"
	fi
}

cmd_check() {
	while [ $# -gt 0 ]; do
		case "$1" in
		--bin-dir) need_value "$1" $# && BIN_DIR=$2 && shift ;;
		--chroot-base) need_value "$1" $# && CHROOT_BASE=$2 && shift ;;
		--guest-dir) need_value "$1" $# && GUEST_DIR=$2 && shift ;;
		*) die "check: unknown option $1 (see $PROG help)" ;;
		esac
		shift
	done
	local arch
	arch="$(uname -m)"
	case "$arch" in
	x86_64 | aarch64) ok "architecture: $arch" ;;
	*) fail "architecture: $arch (Firecracker runs on x86_64 and aarch64)" ;;
	esac
	if [ "$(id -u)" -eq 0 ]; then
		ok "user: root (the orchestrator must run as root as well)"
	else
		warn "user: $(id -un), not root: the orchestrator must run as root, and some checks below see less than it would"
	fi
	check_device kvm /dev/kvm "load kvm_intel or kvm_amd, enable virtualisation in the firmware, or nested virtualisation in a cloud VM"
	check_device tun /dev/net/tun "modprobe tun"
	check_cgroup
	check_binaries
	check_tools
	check_chroot_base
	check_guest_files
	check_forward_policy
	if [ "$FAILED" -ne 0 ]; then
		echo "some checks failed: kici would refuse to spawn VMs on this host"
		exit 1
	fi
}

# -------------------------------------------------------------- install

cmd_install() {
	local skip_checksum=0
	while [ $# -gt 0 ]; do
		case "$1" in
		--version) need_value "$1" $# && FIRECRACKER_VERSION=$2 && shift ;;
		--bin-dir) need_value "$1" $# && BIN_DIR=$2 && shift ;;
		--skip-checksum) skip_checksum=1 ;;
		*) die "install: unknown option $1 (see $PROG help)" ;;
		esac
		shift
	done
	need_tools curl tar sha256sum install
	local arch version tgz tmp release
	arch="$(host_arch)"
	version=$FIRECRACKER_VERSION
	if [ "$version" = latest ]; then
		# GitHub redirects .../releases/latest to .../releases/tag/<tag>.
		version="$(basename "$(curl -fsSLI -o /dev/null -w '%{url_effective}' "$RELEASES_URL/latest")")"
		[ -n "$version" ] || die "install: could not find the latest release"
	fi
	tgz="firecracker-$version-$arch.tgz"
	tmp="$(mktemp -d)"
	# shellcheck disable=SC2064 # expand $tmp now: it is local
	trap "rm -rf '$tmp'" EXIT

	echo "downloading $RELEASES_URL/download/$version/$tgz"
	curl -fSL --progress-bar -o "$tmp/$tgz" "$RELEASES_URL/download/$version/$tgz" ||
		die "install: download of $tgz failed (is $version a release tag?)"
	if [ "$skip_checksum" -eq 0 ]; then
		curl -fsSL -o "$tmp/$tgz.sha256.txt" "$RELEASES_URL/download/$version/$tgz.sha256.txt" ||
			die "install: $tgz.sha256.txt is not in the release (use --skip-checksum to install anyway)"
		(cd "$tmp" && sha256sum -c --quiet "$tgz.sha256.txt") || die "install: $tgz does not match its SHA-256"
		echo "checksum ok"
	fi
	tar -xzf "$tmp/$tgz" -C "$tmp"
	release="$tmp/release-$version-$arch"
	if [ ! -f "$release/firecracker-$version-$arch" ] || [ ! -f "$release/jailer-$version-$arch" ]; then
		die "install: the tarball lacks release-$version-$arch/firecracker-$version-$arch or jailer-$version-$arch"
	fi

	mkdir -p "$BIN_DIR"
	# Regular files named firecracker and jailer: the jailer resolves
	# symlinks and names the jail after the real file name.
	install -m 0755 "$release/firecracker-$version-$arch" "$BIN_DIR/firecracker"
	install -m 0755 "$release/jailer-$version-$arch" "$BIN_DIR/jailer"
	echo "installed $BIN_DIR/firecracker and $BIN_DIR/jailer ($version, $arch)"
	"$BIN_DIR/firecracker" --version | head -n 1
}

# ---------------------------------------------------------------- guest

# ci_keys URL lists the object keys of a bucket listing (ListObjectsV2).
ci_keys() {
	curl -fsSL "$1" | grep -o '<Key>[^<]*</Key>' | sed -e 's/^<Key>//' -e 's/<\/Key>$//' || true
}

# ci_prefix prints the newest folder of Firecracker's CI images, as the
# getting-started guide picks it: folders are named <YYYYMMDD>-<id>/.
ci_prefix() {
	curl -fsSL "$CI_BUCKET_URL?list-type=2&prefix=firecracker-ci/&delimiter=/" |
		grep -o '<Prefix>firecracker-ci/[0-9]\{8\}-[^/<]*/</Prefix>' |
		sed -e 's/^<Prefix>//' -e 's/<\/Prefix>$//' | sort | tail -n 1 || true
}

# ci_newest PREFIX PATTERN prints the newest key under PREFIX whose name
# (after PREFIX) matches the extended regular expression PATTERN.
ci_newest() {
	local prefix=$1 pattern=$2 first=${3:-}
	ci_keys "$CI_BUCKET_URL?list-type=2&prefix=$prefix$first" |
		grep -E "^$prefix$pattern\$" | sort -V | tail -n 1 || true
}

# is_elf FILE succeeds if FILE starts with the ELF magic.
is_elf() {
	[ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]
}

# find_in_image ROOT NAME succeeds if ROOT has NAME in a usual bin dir.
find_in_image() {
	local d
	for d in usr/local/sbin usr/local/bin usr/sbin usr/bin sbin bin; do
		if [ -e "$1/$d/$2" ] || [ -L "$1/$d/$2" ]; then
			return 0
		fi
	done
	return 1
}

GUEST_TMP=
GUEST_MNT=
guest_cleanup() {
	if [ -n "$GUEST_MNT" ] && mountpoint -q "$GUEST_MNT"; then
		umount "$GUEST_MNT" || echo "$PROG: could not unmount $GUEST_MNT" >&2
	fi
	if [ -n "$GUEST_TMP" ]; then
		rm -rf "$GUEST_TMP"
	fi
}

cmd_guest() {
	local agent="" kernel="" rootfs="" size=2G dns=1.1.1.1 force=0 prefix=""
	local init="$SCRIPT_DIR/firecracker-rootfs-init.sh" out=$GUEST_DIR
	while [ $# -gt 0 ]; do
		case "$1" in
		--agent) need_value "$1" $# && agent=$2 && shift ;;
		--kernel) need_value "$1" $# && kernel=$2 && shift ;;
		--rootfs) need_value "$1" $# && rootfs=$2 && shift ;;
		--out) need_value "$1" $# && out=$2 && shift ;;
		--size) need_value "$1" $# && size=$2 && shift ;;
		--dns) need_value "$1" $# && dns=$2 && shift ;;
		--init) need_value "$1" $# && init=$2 && shift ;;
		--ci-prefix) need_value "$1" $# && prefix=$2 && shift ;;
		--force) force=1 ;;
		*) die "guest: unknown option $1 (see $PROG help)" ;;
		esac
		shift
	done
	[ -n "$agent" ] || die "guest: --agent PATH is required: the kici-agent binary the guest runs"
	if [ ! -f "$agent" ] || [ ! -x "$agent" ]; then
		die "guest: $agent is not an executable file"
	fi
	[ -f "$init" ] || die "guest: the guest's init $init does not exist (use --init PATH)"
	[ -z "$kernel" ] || [ -f "$kernel" ] || die "guest: kernel $kernel does not exist"
	[ -z "$rootfs" ] || [ -f "$rootfs" ] || die "guest: rootfs $rootfs does not exist"
	if [ "$force" -eq 0 ]; then
		for f in "$out/vmlinux" "$out/rootfs.ext4"; do
			[ ! -e "$f" ] || die "guest: $f exists; use --force to replace it"
		done
	fi
	need_root guest
	need_tools mount umount mountpoint cp install e2fsck
	local arch
	arch="$(host_arch)"

	mkdir -p "$out"
	# The work happens beside the results, so that the final rename stays
	# on one file system; it is removed however the command ends.
	GUEST_TMP="$(mktemp -d "$out/.guest-build.XXXXXX")"
	GUEST_MNT="$GUEST_TMP/mnt"
	trap guest_cleanup EXIT
	mkdir -p "$GUEST_MNT"

	if { [ -z "$kernel" ] || [ -z "$rootfs" ]; } && [ -z "$prefix" ]; then
		need_tools curl
		prefix="$(ci_prefix)"
		[ -n "$prefix" ] || die "guest: could not list Firecracker's CI images at $CI_BUCKET_URL (use --kernel and --rootfs, or --ci-prefix)"
		echo "using Firecracker's CI images of $prefix"
	fi

	# The kernel.
	if [ -n "$kernel" ]; then
		cp "$kernel" "$GUEST_TMP/vmlinux"
	else
		local key
		key="$(ci_newest "$prefix" "$arch/vmlinux-[0-9]+\.[0-9]+\.[0-9]{1,3}" "$arch/vmlinux-")"
		[ -n "$key" ] || die "guest: no kernel for $arch under $prefix"
		echo "downloading $CI_BUCKET_URL/$key"
		curl -fSL --progress-bar -o "$GUEST_TMP/vmlinux" "$CI_BUCKET_URL/$key"
	fi
	if [ "$arch" = x86_64 ] && ! is_elf "$GUEST_TMP/vmlinux"; then
		die "guest: the kernel is not an ELF file: Firecracker boots an uncompressed vmlinux on x86_64"
	fi

	# The base rootfs: a given ext4 image, copied; or the guide's Ubuntu
	# squashfs, unpacked into a new ext4 image.
	if [ -n "$rootfs" ]; then
		cp --sparse=always "$rootfs" "$GUEST_TMP/rootfs.ext4"
	else
		need_tools unsquashfs mkfs.ext4 truncate
		local key
		key="$(ci_newest "$prefix" "$arch/ubuntu-[0-9]+\.[0-9]+\.squashfs" "$arch/ubuntu-")"
		[ -n "$key" ] || die "guest: no Ubuntu rootfs for $arch under $prefix"
		echo "downloading $CI_BUCKET_URL/$key"
		curl -fSL --progress-bar -o "$GUEST_TMP/rootfs.squashfs" "$CI_BUCKET_URL/$key"
		unsquashfs -q -d "$GUEST_TMP/tree" "$GUEST_TMP/rootfs.squashfs" >/dev/null
		rm -f "$GUEST_TMP/rootfs.squashfs"
		truncate -s "$size" "$GUEST_TMP/rootfs.ext4"
		mkfs.ext4 -q -F -d "$GUEST_TMP/tree" "$GUEST_TMP/rootfs.ext4"
		rm -rf "$GUEST_TMP/tree"
	fi

	# kici's part of the rootfs.
	mount -t ext4 -o loop "$GUEST_TMP/rootfs.ext4" "$GUEST_MNT" ||
		die "guest: cannot loop-mount the rootfs (is it an ext4 image?)"
	install -D -m 0755 "$agent" "$GUEST_MNT/usr/local/bin/kici-agent"
	install -m 0755 "$init" "$GUEST_MNT/init"
	# Mount points: the rootfs is read-only in the VM.
	mkdir -p "$GUEST_MNT/kici" "$GUEST_MNT/proc" "$GUEST_MNT/sys" "$GUEST_MNT/dev" \
		"$GUEST_MNT/tmp" "$GUEST_MNT/run" "$GUEST_MNT/etc"
	printf '# Read by /init (kici). Nameservers of /run/resolv.conf.\nKICI_GUEST_DNS="%s"\n' "$dns" \
		>"$GUEST_MNT/etc/kici-guest.env"
	# /init writes the resolver into /run, a tmpfs.
	rm -f "$GUEST_MNT/etc/resolv.conf"
	ln -s /run/resolv.conf "$GUEST_MNT/etc/resolv.conf"
	local t missing=""
	for t in sh mount ip reboot; do
		find_in_image "$GUEST_MNT" "$t" || missing="$missing $t"
	done
	find_in_image "$GUEST_MNT" bash || echo "note: the rootfs has no bash: steps run with sh -e"
	umount "$GUEST_MNT"
	e2fsck -fn "$GUEST_TMP/rootfs.ext4" >/dev/null 2>&1 ||
		die "guest: e2fsck finds errors in the rootfs image"
	[ -z "$missing" ] || die "guest: the rootfs lacks$missing, which /init needs"

	# World-readable, so that each spawn hard-links them into its jail.
	chmod 0644 "$GUEST_TMP/vmlinux" "$GUEST_TMP/rootfs.ext4"
	mv -f "$GUEST_TMP/vmlinux" "$out/vmlinux"
	mv -f "$GUEST_TMP/rootfs.ext4" "$out/rootfs.ext4"
	echo "wrote $out/vmlinux and $out/rootfs.ext4"
	echo "next: $PROG config --guest-dir $out > /etc/kici/scalers.yaml"
}

# --------------------------------------------------------------- config

cmd_config() {
	local name=microvms labels=linux,microvm max_agents=4 vcpus=2 mem=2048 overlay=4096
	local cidr=10.0.0.0/24 bridge=kici-br0
	while [ $# -gt 0 ]; do
		case "$1" in
		--name) need_value "$1" $# && name=$2 && shift ;;
		--labels) need_value "$1" $# && labels=$2 && shift ;;
		--max-agents) need_value "$1" $# && max_agents=$2 && shift ;;
		--vcpus) need_value "$1" $# && vcpus=$2 && shift ;;
		--mem) need_value "$1" $# && mem=$2 && shift ;;
		--overlay) need_value "$1" $# && overlay=$2 && shift ;;
		--bin-dir) need_value "$1" $# && BIN_DIR=$2 && shift ;;
		--guest-dir) need_value "$1" $# && GUEST_DIR=$2 && shift ;;
		--chroot-base) need_value "$1" $# && CHROOT_BASE=$2 && shift ;;
		--uid) need_value "$1" $# && JAILER_UID=$2 && shift ;;
		--gid) need_value "$1" $# && JAILER_GID=$2 && shift ;;
		--cidr) need_value "$1" $# && cidr=$2 && shift ;;
		--bridge) need_value "$1" $# && bridge=$2 && shift ;;
		*) die "config: unknown option $1 (see $PROG help)" ;;
		esac
		shift
	done
	cat <<EOF
version: 1
firecracker:
  cidr: $cidr
  bridgeName: $bridge
  table: kici
  autoProvisionHost: true
scalers:
  - name: $name
    type: firecracker
    maxAgents: $max_agents
    firecrackerPath: $BIN_DIR/firecracker
    jailerPath: $BIN_DIR/jailer
    kernelPath: $GUEST_DIR/vmlinux
    uid: $JAILER_UID
    gid: $JAILER_GID
    chrootBaseDir: $CHROOT_BASE
    vcpuCount: $vcpus
    memSizeMib: $mem
    labelSets:
      - labels: [${labels//,/, }]
        rootfsPath: $GUEST_DIR/rootfs.ext4
        overlayDriveSizeMib: $overlay
EOF
}

# ----------------------------------------------------------------- main

main() {
	if [ $# -eq 0 ]; then
		usage >&2
		exit 2
	fi
	local cmd=$1
	shift
	case "$cmd" in
	check) cmd_check "$@" ;;
	install) cmd_install "$@" ;;
	guest) cmd_guest "$@" ;;
	config) cmd_config "$@" ;;
	help | -h | --help) usage ;;
	*)
		echo "$PROG: unknown command $cmd" >&2
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
