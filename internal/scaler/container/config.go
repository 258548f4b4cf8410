package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoRuntime is returned by New when no engine socket was found; the
// message names every path it tried.
var ErrNoRuntime = errors.New("no container runtime found")

// Runtime names, for Config.Runtime and Backend.Runtime.
const (
	RuntimeAuto   = "auto"
	RuntimeDocker = "docker"
	RuntimePodman = "podman"
)

// DefaultStopGrace is the time Destroy gives an agent between SIGTERM and
// SIGKILL when Config.StopGrace is zero.
const DefaultStopGrace = 10 * time.Second

// Config configures one container backend, that is one scaler of type
// "container".
type Config struct {
	// Name is the scaler's name; required. Containers carry it in the
	// kici-scaler-name label.
	Name string
	// Instance is this orchestrator instance's id; required, and stable
	// across restarts (Recover and ReapLeftovers only touch containers
	// labelled with it).
	Instance string
	// Host is a remote engine's address, e.g. "tcp://10.0.0.5:2376". Empty
	// means a local socket (SocketPath, or auto-detection).
	Host string
	// SocketPath is the engine's unix socket. Empty means auto-detect:
	// the first readable and writable one of /var/run/docker.sock,
	// /run/podman/podman.sock and $XDG_RUNTIME_DIR/podman/podman.sock.
	SocketPath string
	// Runtime is "docker", "podman" or "auto" (empty means auto). With
	// auto-detection it restricts the sockets tried; with Host it names
	// the remote engine.
	Runtime string
	// ExtraHosts are added to every container's /etc/hosts, as
	// "name:ip" or "name:host-gateway" (for instance
	// "host.docker.internal:host-gateway", so that agents can reach an
	// orchestrator on the engine's host). Nil adds none.
	ExtraHosts []string
	// StopGrace is how long Destroy waits between SIGTERM and SIGKILL,
	// rounded down to whole seconds (the engine's unit); zero means 10 s.
	StopGrace time.Duration
	// Now returns the current time (handle and event times); nil means
	// time.Now.
	Now func() time.Time
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("container backend config: Name is required")
	case c.Instance == "":
		return errors.New("container backend config: Instance is required")
	case c.Host != "" && c.SocketPath != "":
		return fmt.Errorf("container backend config: Host %q and SocketPath %q are exclusive", c.Host, c.SocketPath)
	case c.StopGrace < 0:
		return fmt.Errorf("container backend config: StopGrace %s is negative", c.StopGrace)
	}
	switch c.Runtime {
	case "", RuntimeAuto, RuntimeDocker, RuntimePodman:
	default:
		return fmt.Errorf("container backend config: Runtime %q is not docker, podman or auto", c.Runtime)
	}
	return nil
}

func (c *Config) defaults() {
	if c.Runtime == "" {
		c.Runtime = RuntimeAuto
	}
	if c.StopGrace == 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// endpoint is where the engine listens and which runtime it is.
type endpoint struct {
	host    string // for client.WithHost: "unix:///var/run/docker.sock", "tcp://..."
	runtime string // RuntimeDocker or RuntimePodman
}

// socketCandidate is one socket auto-detection tries.
type socketCandidate struct {
	path    string
	runtime string
}

// defaultSockets lists the sockets auto-detection tries, in order;
// xdgRuntimeDir is $XDG_RUNTIME_DIR (the rootless Podman socket is tried
// only when it is set).
func defaultSockets(xdgRuntimeDir string) []socketCandidate {
	out := []socketCandidate{
		{"/var/run/docker.sock", RuntimeDocker},
		{"/run/podman/podman.sock", RuntimePodman},
	}
	if xdgRuntimeDir != "" {
		out = append(out, socketCandidate{filepath.Join(xdgRuntimeDir, "podman", "podman.sock"), RuntimePodman})
	}
	return out
}

// resolveEndpoint picks the engine from the config: Host, else
// SocketPath, else the first usable candidate (restricted to
// cfg.Runtime unless it is auto). usable reports whether a socket path
// can be read and written.
func resolveEndpoint(cfg Config, candidates []socketCandidate, usable func(string) error) (endpoint, error) {
	switch {
	case cfg.Host != "":
		rt := RuntimeDocker
		if cfg.Runtime == RuntimePodman {
			rt = RuntimePodman
		}
		return endpoint{host: cfg.Host, runtime: rt}, nil
	case cfg.SocketPath != "":
		rt := RuntimeDocker
		if strings.Contains(cfg.SocketPath, "podman") {
			rt = RuntimePodman
		}
		return endpoint{host: "unix://" + cfg.SocketPath, runtime: rt}, nil
	}
	var tried []string
	for _, c := range candidates {
		if cfg.Runtime != RuntimeAuto && cfg.Runtime != c.runtime {
			continue
		}
		err := usable(c.path)
		if err == nil {
			return endpoint{host: "unix://" + c.path, runtime: c.runtime}, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", c.path, err))
	}
	if len(tried) == 0 {
		return endpoint{}, fmt.Errorf("%w: no socket to try for runtime %q", ErrNoRuntime, cfg.Runtime)
	}
	return endpoint{}, fmt.Errorf("%w: tried %s; start Docker or Podman, or set the scaler's socketPath or host", ErrNoRuntime, strings.Join(tried, ", "))
}

// socketUsable reports why path is not a socket this process may read and
// write, or nil.
func socketUsable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("does not exist")
		}
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return errors.New("not a socket")
	}
	if err := accessRW(path); err != nil {
		return fmt.Errorf("not readable and writable: %w", err)
	}
	return nil
}
