package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// The check* functions return "" for a good value, else what is wrong
// with it, phrased to follow the value's path.

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkLabel: non-empty, printable, no spaces or commas (labels travel
// comma-joined in KICI_LABELS), and not in the reserved kici: namespace.
func checkLabel(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) || !unicode.IsGraphic(r) }) {
		return fmt.Sprintf("invalid label %q: labels are non-empty and hold no spaces, commas or control characters", s)
	}
	if strings.HasPrefix(strings.ToLower(s), "kici:") {
		return fmt.Sprintf("label %q: the kici: prefix is reserved for the labels kici adds itself", s)
	}
	return ""
}

func checkOrchestratorURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" || u.Hostname() == "" {
		return fmt.Sprintf("%q is not a ws:// or wss:// URL with a host, such as ws://10.0.0.1:4000/ws", s)
	}
	if u.Fragment != "" || u.User != nil {
		return fmt.Sprintf("%q: the URL may not hold a user or a fragment", s)
	}
	return ""
}

// checkDaemonHost accepts the tcp:// URL of a remote container daemon.
func checkDaemonHost(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "tcp" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Sprintf("%q is not a tcp://HOST:PORT address of a container daemon (for a local daemon, use socketPath)", s)
	}
	return ""
}

// checkHostPath accepts an absolute path on the orchestrator's host.
func checkHostPath(s string) string {
	if !filepath.IsAbs(s) || strings.ContainsRune(s, 0) {
		return fmt.Sprintf("%q is not an absolute path", s)
	}
	return ""
}

// checkImage accepts any image reference without spaces; the runtime
// judges the rest when it pulls.
func checkImage(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsGraphic(r) }) {
		return fmt.Sprintf("invalid image %q: an image reference is non-empty and holds no spaces", s)
	}
	return ""
}

func checkEnvValue(s string) string {
	if strings.ContainsRune(s, 0) {
		return "an environment value cannot hold a NUL byte"
	}
	return ""
}

var hostnameLabelRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// isHostname reports whether s is an RFC 1123 host name.
func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !hostnameLabelRE.MatchString(l) {
			return false
		}
	}
	return true
}

// checkExtraHost accepts "host:address": an RFC 1123 host name, and an
// IPv4 or IPv6 literal or the keyword host-gateway. The host holds no
// colon, so the first colon splits (IPv6 addresses hold several).
func checkExtraHost(s string) string {
	host, addr, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Sprintf("invalid entry %q: use host:address, such as host.docker.internal:host-gateway", s)
	}
	if !isHostname(host) {
		return fmt.Sprintf("invalid entry %q: %q is not a host name", s, host)
	}
	if addr == "host-gateway" {
		return ""
	}
	if _, err := netip.ParseAddr(addr); err != nil {
		return fmt.Sprintf("invalid entry %q: %q is neither an IP address nor host-gateway", s, addr)
	}
	return ""
}

// volumeOptions are the bind options a volume spec may end with.
var volumeOptions = []string{"ro", "rw", "z", "Z", "shared", "rshared", "slave", "rslave", "private", "rprivate"}

// checkVolume accepts a bind spec "/host:/container[:options]", options
// comma-separated from volumeOptions.
func checkVolume(s string) string {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Sprintf("invalid bind %q: use /host/path:/container/path, optionally followed by :ro", s)
	}
	if !filepath.IsAbs(parts[0]) || strings.ContainsRune(s, 0) {
		return fmt.Sprintf("invalid bind %q: the host path %q is not absolute (named volumes are not supported)", s, parts[0])
	}
	if !path.IsAbs(parts[1]) {
		return fmt.Sprintf("invalid bind %q: the container path %q is not absolute", s, parts[1])
	}
	if path.Clean(parts[1]) == "/" {
		return fmt.Sprintf("invalid bind %q: cannot bind over the container's /", s)
	}
	if len(parts) == 3 {
		for _, o := range strings.Split(parts[2], ",") {
			if !contains(volumeOptions, o) {
				return fmt.Sprintf("invalid bind %q: unknown option %q (known: %s)", s, o, strings.Join(volumeOptions, ", "))
			}
		}
	}
	return ""
}
