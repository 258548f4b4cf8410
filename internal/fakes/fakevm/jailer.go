package fakevm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// Environment the fake jailer passes to the fake firecracker. The real
// jailer clears the environment and drops privileges before it execs
// Firecracker; the fake firecracker needs root a little longer (to make
// the guest's network namespace), so the jailer tells it where to chroot
// and whom to become instead.
const (
	envJailRoot = "KICI_FAKE_JAIL_ROOT"
	envJailUID  = "KICI_FAKE_JAIL_UID"
	envJailGID  = "KICI_FAKE_JAIL_GID"
	// EnvGuestAgent names the binary the fake guest runs as its agent. The
	// jailer reads it from its own environment (default: kici-agent in the
	// directory above the jailer's, i.e. bin/kici-agent beside bin/fakes/)
	// and passes it on as an absolute path.
	EnvGuestAgent = "KICI_FAKE_GUEST_AGENT"
	envGuestAgent = EnvGuestAgent
)

// Limits of the jailer's arguments (src/utils/src/validators.rs).
const (
	maxInstanceIDLen = 64
	defaultNoFile    = 2048
	defaultChroot    = "/srv/jailer"
)

// jailerArgs are the command-line arguments of the jailer
// (src/jailer/src/main.rs).
var jailerArgs = []argSpec{
	{name: "id", value: true, required: true, help: "Jail ID."},
	{name: "exec-file", value: true, required: true, help: "File path to exec into."},
	{name: "uid", value: true, required: true, help: "The user identifier the jailer switches to after exec."},
	{name: "gid", value: true, required: true, help: "The group identifier the jailer switches to after exec."},
	{name: "chroot-base-dir", value: true, def: defaultChroot, help: "The base folder where chroot jails are located."},
	{name: "netns", value: true, help: "Path to the network namespace this microVM should join."},
	{name: "daemonize", help: "Daemonize the jailer before exec, by invoking setsid(), and redirecting the standard I/O file descriptors to /dev/null."},
	{name: "new-pid-ns", help: "Exec into a new PID namespace."},
	{name: "cgroup", multiple: true, help: "Cgroup and value to be set by the jailer, <cgroup_file>=<value> (validated, not applied, by the fake)."},
	{name: "resource-limit", multiple: true, help: "Resource limit values to be set by the jailer, <resource>=<value> with resource fsize or no-file."},
	{name: "cgroup-version", value: true, def: "1", help: "Select the cgroup version used by the jailer."},
	{name: "parent-cgroup", value: true, help: "Parent cgroup in which the cgroup of this microvm will be placed."},
}

// JailerConfig is a validated jailer command line.
type JailerConfig struct {
	// ID is the VM's id: letters, digits and '-', 1..64 characters.
	ID string
	// ExecFile is the absolute, symlink-free path of the firecracker
	// binary; ExecName is its file name.
	ExecFile, ExecName string
	// UID and GID are the identity the VMM drops to.
	UID, GID uint32
	// ChrootBaseDir is the absolute base of the jails; default /srv/jailer.
	ChrootBaseDir string
	// NetNS is a network namespace handle to join; empty for none.
	NetNS string
	// Daemonize and NewPIDNS are the flags of the same names.
	Daemonize, NewPIDNS bool
	// CgroupVersion, Cgroups and ParentCgroup are validated and not
	// applied: the fake creates no cgroups.
	CgroupVersion int
	Cgroups       []string
	ParentCgroup  string
	// FileSize and NoFile are the resource limits; NoFile defaults to 2048
	// and FileSize 0 means unlimited.
	FileSize, NoFile uint64
	// ExtraArgs are the arguments after "--", passed to firecracker.
	ExtraArgs []string
}

// ChrootDir is the jail root, <ChrootBaseDir>/<ExecName>/<ID>/root.
func (c JailerConfig) ChrootDir() string {
	return filepath.Join(c.ChrootBaseDir, c.ExecName, c.ID, "root")
}

// PIDFile is the file that receives the VMM's PID, <jail root>/<ExecName>.pid.
func (c JailerConfig) PIDFile() string {
	return filepath.Join(c.ChrootDir(), c.ExecName+".pid")
}

// errJailerHelp and errJailerVersion are returned by ParseJailerArgs for
// --help and --version.
var (
	errJailerHelp    = errors.New("help")
	errJailerVersion = errors.New("version")
)

// ParseJailerArgs parses and validates the jailer's command line (without
// the program name) as the real jailer does before it touches anything:
// the id, the exec file (which must exist, be a regular executable file and,
// for the fake, be named like "*firecracker*"), the chroot base directory,
// uid and gid, cgroup and resource-limit formats.
func ParseJailerArgs(args []string) (JailerConfig, error) {
	p, err := parseArgs(jailerArgs, args)
	switch {
	case err != nil:
		return JailerConfig{}, fmt.Errorf("Failed to parse arguments: %w", err)
	case p.help:
		return JailerConfig{}, errJailerHelp
	case p.version:
		return JailerConfig{}, errJailerVersion
	}
	c := JailerConfig{ID: p.single["id"], NetNS: p.single["netns"], Daemonize: p.flags["daemonize"],
		NewPIDNS: p.flags["new-pid-ns"], Cgroups: p.multi["cgroup"], ExtraArgs: p.extra, NoFile: defaultNoFile}
	if err := validateInstanceID(c.ID); err != nil {
		return JailerConfig{}, fmt.Errorf("Invalid instance ID: %w", err)
	}
	if c.ExecFile, c.ExecName, err = validateExecFile(p.single["exec-file"]); err != nil {
		return JailerConfig{}, err
	}
	base := p.single["chroot-base-dir"]
	if c.ChrootBaseDir, err = canonicalize(base); err != nil {
		return JailerConfig{}, err
	}
	if fi, err := os.Stat(c.ChrootBaseDir); err != nil || !fi.IsDir() {
		return JailerConfig{}, fmt.Errorf("%s is not a directory", c.ChrootBaseDir)
	}
	uid, err := strconv.ParseUint(p.single["uid"], 10, 32)
	if err != nil {
		return JailerConfig{}, fmt.Errorf("Invalid uid: %s", p.single["uid"])
	}
	gid, err := strconv.ParseUint(p.single["gid"], 10, 32)
	if err != nil {
		return JailerConfig{}, fmt.Errorf("Invalid gid: %s", p.single["gid"])
	}
	c.UID, c.GID = uint32(uid), uint32(gid)
	c.ParentCgroup = p.single["parent-cgroup"]
	if c.ParentCgroup == "" {
		c.ParentCgroup = c.ExecName
	}
	if badPathComponents(c.ParentCgroup) {
		return JailerConfig{}, errors.New("Parent cgroup path is invalid. Path should not be absolute or contain '..' or '.'")
	}
	v := p.single["cgroup-version"]
	if c.CgroupVersion, err = strconv.Atoi(v); err != nil || (c.CgroupVersion != 1 && c.CgroupVersion != 2) {
		return JailerConfig{}, fmt.Errorf("Cgroup version %s is not supported", v)
	}
	for _, cg := range c.Cgroups {
		k, val, ok := strings.Cut(cg, "=")
		if !ok || val == "" || strings.Contains(val, "=") {
			return JailerConfig{}, fmt.Errorf("Invalid format for cgroups: %s", cg)
		}
		if badPathComponents(k) {
			return JailerConfig{}, fmt.Errorf("Invalid cgroup file: %s", cg)
		}
	}
	for _, rl := range p.multi["resource-limit"] {
		name, val, ok := strings.Cut(rl, "=")
		if !ok {
			return JailerConfig{}, fmt.Errorf("Invalid format for resources limits: %s", rl)
		}
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return JailerConfig{}, fmt.Errorf("Invalid limit value for resource: %s: %v", val, err)
		}
		switch name {
		case "fsize":
			c.FileSize = n
		case "no-file":
			c.NoFile = n
		default:
			return JailerConfig{}, fmt.Errorf("Invalid resource argument: %s", name)
		}
	}
	return c, nil
}

// validateInstanceID is Firecracker's validate_instance_id.
func validateInstanceID(id string) error {
	if len(id) < 1 || len(id) > maxInstanceIDLen {
		return fmt.Errorf("Invalid len (%d);  the length must be between 1 and %d", len(id), maxInstanceIDLen)
	}
	for i, c := range []rune(id) {
		if c != '-' && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return fmt.Errorf("Invalid char (%c) at position %d", c, i)
		}
	}
	return nil
}

// validateExecFile resolves the exec file and checks it.
func validateExecFile(p string) (path, name string, err error) {
	if path, err = canonicalize(p); err != nil {
		return "", "", err
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("%s is not a file", path)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return "", "", fmt.Errorf("%s is not executable", path)
	}
	name = filepath.Base(path)
	if !strings.Contains(name, "firecracker") {
		return "", "", fmt.Errorf("Invalid filename. The filename of `--exec-file` option must contain \"firecracker\": %s", name)
	}
	return path, name, nil
}

// canonicalize is Rust's fs::canonicalize: absolute, symlinks resolved,
// and the path must exist.
func canonicalize(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("Failed to canonicalize path %s: %s", p, errnoText(err))
	}
	return abs, nil
}

// badPathComponents reports whether p is absolute or has "." or "..".
func badPathComponents(p string) bool {
	if strings.HasPrefix(p, "/") {
		return true
	}
	for _, c := range strings.Split(p, "/") {
		if c == "." || c == ".." {
			return true
		}
	}
	return false
}

// guestAgentPath resolves the guest agent: $KICI_FAKE_GUEST_AGENT, else
// <directory of exe>/../kici-agent; always absolute.
func guestAgentPath(exe string) string {
	p := os.Getenv(EnvGuestAgent)
	if p == "" {
		p = filepath.Join(filepath.Dir(exe), "..", "kici-agent")
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p
}
