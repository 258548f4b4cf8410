package container

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := Config{Name: "ct", Instance: "orch-1"}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string // "" means valid
	}{
		{name: "minimal", edit: func(*Config) {}},
		{name: "podman runtime", edit: func(c *Config) { c.Runtime = RuntimePodman }},
		{name: "no name", edit: func(c *Config) { c.Name = "" }, wantErr: "Name"},
		{name: "no instance", edit: func(c *Config) { c.Instance = "" }, wantErr: "Instance"},
		{name: "host and socket", edit: func(c *Config) { c.Host, c.SocketPath = "tcp://h:2375", "/s.sock" }, wantErr: "SocketPath"},
		{name: "negative grace", edit: func(c *Config) { c.StopGrace = -time.Second }, wantErr: "StopGrace"},
		{name: "unknown runtime", edit: func(c *Config) { c.Runtime = "containerd" }, wantErr: "Runtime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid
			tt.edit(&cfg)
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}

func TestResolveEndpoint(t *testing.T) {
	t.Parallel()
	candidates := defaultSockets("/run/user/1000")
	tests := []struct {
		name    string
		cfg     Config
		usable  []string // paths usable() accepts
		want    endpoint
		wantErr []string // substrings of the error
	}{
		{
			name:   "docker socket first",
			cfg:    Config{Runtime: RuntimeAuto},
			usable: []string{"/var/run/docker.sock", "/run/podman/podman.sock"},
			want:   endpoint{host: "unix:///var/run/docker.sock", runtime: RuntimeDocker},
		},
		{
			name:   "rootful podman when docker is missing",
			cfg:    Config{Runtime: RuntimeAuto},
			usable: []string{"/run/podman/podman.sock", "/run/user/1000/podman/podman.sock"},
			want:   endpoint{host: "unix:///run/podman/podman.sock", runtime: RuntimePodman},
		},
		{
			name:   "rootless podman last",
			cfg:    Config{Runtime: RuntimeAuto},
			usable: []string{"/run/user/1000/podman/podman.sock"},
			want:   endpoint{host: "unix:///run/user/1000/podman/podman.sock", runtime: RuntimePodman},
		},
		{
			name:   "runtime podman skips docker",
			cfg:    Config{Runtime: RuntimePodman},
			usable: []string{"/var/run/docker.sock", "/run/user/1000/podman/podman.sock"},
			want:   endpoint{host: "unix:///run/user/1000/podman/podman.sock", runtime: RuntimePodman},
		},
		{
			name: "explicit socket path",
			cfg:  Config{Runtime: RuntimeAuto, SocketPath: "/srv/podman/podman.sock"},
			want: endpoint{host: "unix:///srv/podman/podman.sock", runtime: RuntimePodman},
		},
		{
			name: "remote host",
			cfg:  Config{Runtime: RuntimeAuto, Host: "tcp://10.0.0.5:2376"},
			want: endpoint{host: "tcp://10.0.0.5:2376", runtime: RuntimeDocker},
		},
		{
			name: "remote podman",
			cfg:  Config{Runtime: RuntimePodman, Host: "tcp://10.0.0.5:8080"},
			want: endpoint{host: "tcp://10.0.0.5:8080", runtime: RuntimePodman},
		},
		{
			name:    "nothing found names every path",
			cfg:     Config{Runtime: RuntimeAuto},
			wantErr: []string{"/var/run/docker.sock (nope)", "/run/podman/podman.sock (nope)", "/run/user/1000/podman/podman.sock (nope)"},
		},
		{
			name:    "runtime docker, docker missing",
			cfg:     Config{Runtime: RuntimeDocker},
			usable:  []string{"/run/podman/podman.sock"},
			wantErr: []string{"/var/run/docker.sock (nope)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			usable := func(p string) error {
				for _, u := range tt.usable {
					if u == p {
						return nil
					}
				}
				return errors.New("nope")
			}
			got, err := resolveEndpoint(tt.cfg, candidates, usable)
			if tt.wantErr != nil {
				if !errors.Is(err, ErrNoRuntime) {
					t.Fatalf("resolveEndpoint() error = %v, want ErrNoRuntime", err)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("resolveEndpoint() = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(endpoint{})); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultSocketsWithoutXDG(t *testing.T) {
	t.Parallel()
	got := defaultSockets("")
	want := []socketCandidate{{"/var/run/docker.sock", RuntimeDocker}, {"/run/podman/podman.sock", RuntimePodman}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(socketCandidate{})); diff != "" {
		t.Errorf("defaultSockets(\"\") (-want +got):\n%s", diff)
	}
}

func TestSocketUsable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := socketUsable(dir + "/missing.sock"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing socket: got %v, want \"does not exist\"", err)
	}
	if err := socketUsable(dir); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("directory: got %v, want \"not a socket\"", err)
	}
}

func TestNewUnreachableEngine(t *testing.T) {
	t.Parallel()
	sock := t.TempDir() + "/docker.sock"
	_, err := New(t.Context(), nil, Config{Name: "ct", Instance: "orch-1", SocketPath: sock})
	if err == nil || !strings.Contains(err.Error(), "ping docker at \"unix://"+sock+"\"") {
		t.Errorf("New with a socket nobody serves: got %v, want a ping error naming the socket", err)
	}
	_, err = New(t.Context(), nil, Config{Name: "ct"})
	if err == nil || !strings.Contains(err.Error(), "Instance") {
		t.Errorf("New without Instance: got %v, want an error naming Instance", err)
	}
}
