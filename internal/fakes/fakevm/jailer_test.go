package fakevm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/fakes/fakevm"
)

func TestParseJailerArgs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fc := filepath.Join(dir, "firecracker")
	other := filepath.Join(dir, "vmm")
	noexec := filepath.Join(dir, "firecracker-noexec")
	for p, mode := range map[string]os.FileMode{fc: 0o755, other: 0o755, noexec: 0o644} {
		if err := os.WriteFile(p, []byte("#!/bin/true\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "fc-link")
	if err := os.Symlink(fc, link); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"--id", "vm-1", "--exec-file", fc, "--uid", "10000", "--gid", "10001", "--chroot-base-dir", base}, extra...)
	}
	tests := []struct {
		name    string
		args    []string
		want    *fakevm.JailerConfig
		wantErr string
	}{
		{name: "kici's command line", args: args("--new-pid-ns", "--cgroup-version", "2", "--", "--config-file", "/config.json", "--log-path", "/vmm.log"),
			want: &fakevm.JailerConfig{ID: "vm-1", ExecFile: fc, ExecName: "firecracker", UID: 10000, GID: 10001, ChrootBaseDir: base,
				NewPIDNS: true, CgroupVersion: 2, ParentCgroup: "firecracker", NoFile: 2048,
				ExtraArgs: []string{"--config-file", "/config.json", "--log-path", "/vmm.log"}}},
		{name: "every flag", args: args("--netns", "/var/run/netns/x", "--daemonize", "--cgroup", "cpuset.cpus=0", "--cgroup", "cpu.weight=10",
			"--parent-cgroup", "kici/vms", "--resource-limit", "no-file=1024", "--resource-limit", "fsize=1000000"),
			want: &fakevm.JailerConfig{ID: "vm-1", ExecFile: fc, ExecName: "firecracker", UID: 10000, GID: 10001, ChrootBaseDir: base,
				NetNS: "/var/run/netns/x", Daemonize: true, CgroupVersion: 1, Cgroups: []string{"cpuset.cpus=0", "cpu.weight=10"},
				ParentCgroup: "kici/vms", NoFile: 1024, FileSize: 1000000}},
		{name: "exec file through a symlink", args: []string{"--id", "a", "--exec-file", link, "--uid", "1", "--gid", "1", "--chroot-base-dir", base},
			want: &fakevm.JailerConfig{ID: "a", ExecFile: fc, ExecName: "firecracker", UID: 1, GID: 1, ChrootBaseDir: base, CgroupVersion: 1, ParentCgroup: "firecracker", NoFile: 2048}},
		{name: "missing id", args: []string{"--exec-file", fc, "--uid", "1", "--gid", "1"}, wantErr: "Argument 'id' required, but not found."},
		{name: "id with underscore", args: []string{"--id", "vm_1", "--exec-file", fc, "--uid", "1", "--gid", "1", "--chroot-base-dir", base}, wantErr: "Invalid instance ID: Invalid char (_) at position 2"},
		{name: "id too long", args: []string{"--id", strings.Repeat("a", 65), "--exec-file", fc, "--uid", "1", "--gid", "1", "--chroot-base-dir", base}, wantErr: "Invalid len (65);  the length must be between 1 and 64"},
		{name: "exec file missing", args: []string{"--id", "a", "--exec-file", filepath.Join(dir, "nope"), "--uid", "1", "--gid", "1", "--chroot-base-dir", base}, wantErr: "Failed to canonicalize path"},
		{name: "exec file a directory", args: []string{"--id", "a", "--exec-file", dir, "--uid", "1", "--gid", "1", "--chroot-base-dir", base}, wantErr: "is not a file"},
		{name: "exec file not executable", args: []string{"--id", "a", "--exec-file", noexec, "--uid", "1", "--gid", "1", "--chroot-base-dir", base}, wantErr: "is not executable"},
		{name: "exec file not named firecracker", args: []string{"--id", "a", "--exec-file", other, "--uid", "1", "--gid", "1", "--chroot-base-dir", base}, wantErr: `must contain "firecracker": vmm`},
		{name: "chroot base missing", args: []string{"--id", "a", "--exec-file", fc, "--uid", "1", "--gid", "1", "--chroot-base-dir", filepath.Join(dir, "nope")}, wantErr: "Failed to canonicalize path"},
		{name: "chroot base a file", args: []string{"--id", "a", "--exec-file", fc, "--uid", "1", "--gid", "1", "--chroot-base-dir", fc}, wantErr: "is not a directory"},
		{name: "bad uid", args: []string{"--id", "a", "--exec-file", fc, "--uid", "-1", "--gid", "1", "--chroot-base-dir", base}, wantErr: "Invalid uid: -1"},
		{name: "bad gid", args: []string{"--id", "a", "--exec-file", fc, "--uid", "1", "--gid", "x", "--chroot-base-dir", base}, wantErr: "Invalid gid: x"},
		{name: "unknown flag", args: args("--seccomp-level", "2"), wantErr: "Found argument 'seccomp-level' which wasn't expected"},
		{name: "duplicate flag", args: args("--new-pid-ns", "--new-pid-ns"), wantErr: "The argument 'new-pid-ns' was provided more than once."},
		{name: "bad cgroup", args: args("--cgroup", "cpuset.cpus"), wantErr: "Invalid format for cgroups: cpuset.cpus"},
		{name: "cgroup file escapes", args: args("--cgroup", "../x=1"), wantErr: "Invalid cgroup file"},
		{name: "bad cgroup version", args: args("--cgroup-version", "3"), wantErr: "Cgroup version 3 is not supported"},
		{name: "absolute parent cgroup", args: args("--parent-cgroup", "/kici"), wantErr: "Parent cgroup path is invalid"},
		{name: "bad resource limit", args: args("--resource-limit", "cpu=1"), wantErr: "Invalid resource argument: cpu"},
		{name: "bad resource value", args: args("--resource-limit", "no-file=lots"), wantErr: "Invalid limit value for resource: lots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := fakevm.ParseJailerArgs(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if diff := cmp.Diff(*tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestJailerLayout(t *testing.T) {
	t.Parallel()
	c := fakevm.JailerConfig{ID: "vm-1", ExecName: "firecracker", ChrootBaseDir: "/srv/jailer"}
	if got, want := c.ChrootDir(), "/srv/jailer/firecracker/vm-1/root"; got != want {
		t.Errorf("got chroot %q, want %q", got, want)
	}
	if got, want := c.PIDFile(), "/srv/jailer/firecracker/vm-1/root/firecracker.pid"; got != want {
		t.Errorf("got pid file %q, want %q", got, want)
	}
}
