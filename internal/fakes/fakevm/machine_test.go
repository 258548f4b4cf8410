package fakevm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/fakes/fakevm"
)

// fakeTap is a host TAP that carries no frames.
type fakeTap struct {
	name   string
	closed chan struct{}
	once   sync.Once
}

func (t *fakeTap) Read([]byte) (int, error) {
	<-t.closed
	return 0, io.EOF
}
func (t *fakeTap) Write(p []byte) (int, error) { return len(p), nil }
func (t *fakeTap) Close() error {
	t.once.Do(func() { close(t.closed) })
	return nil
}

// fakeGuest records what the machine asks of its guest.
type fakeGuest struct {
	mu    sync.Mutex
	calls []string
	done  chan struct{}
}

func (g *fakeGuest) record(c string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, c)
	return nil
}
func (g *fakeGuest) Pause() error          { return g.record("pause") }
func (g *fakeGuest) Resume() error         { return g.record("resume") }
func (g *fakeGuest) CtrlAltDel() error     { return g.record("ctrlaltdel") }
func (g *fakeGuest) Done() <-chan struct{} { return g.done }
func (g *fakeGuest) Calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

// fakeBooter boots fakeGuests and records their specs.
type fakeBooter struct {
	mu     sync.Mutex
	specs  []fakevm.GuestSpec
	guests []*fakeGuest
}

func (b *fakeBooter) BootGuest(_ context.Context, spec fakevm.GuestSpec) (fakevm.Guest, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := &fakeGuest{done: make(chan struct{})}
	b.specs = append(b.specs, spec)
	b.guests = append(b.guests, g)
	return g, nil
}

func (b *fakeBooter) booted() ([]fakevm.GuestSpec, []*fakeGuest) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]fakevm.GuestSpec(nil), b.specs...), append([]*fakeGuest(nil), b.guests...)
}

// testVM is a machine behind an httptest server, with its files in root.
type testVM struct {
	t      *testing.T
	m      *fakevm.Machine
	srv    *httptest.Server
	root   string
	booter *fakeBooter
	mu     sync.Mutex
	taps   []string // names of the TAPs opened, in order
}

func newTestVM(t *testing.T, root string) *testVM {
	t.Helper()
	vm := &testVM{t: t, root: root, booter: &fakeBooter{}}
	vm.m = fakevm.NewMachine(fakevm.Config{
		ID:   "vm-1",
		Root: root,
		OpenTap: func(name string) (fakevm.Tap, error) {
			if strings.HasPrefix(name, "missing") {
				return nil, errors.New("no such device")
			}
			vm.mu.Lock()
			vm.taps = append(vm.taps, name)
			vm.mu.Unlock()
			return &fakeTap{name: name, closed: make(chan struct{})}, nil
		},
		Guest:     vm.booter,
		LogOutput: testWriter{t},
		LogLevel:  slog.LevelDebug,
	})
	vm.srv = httptest.NewServer(vm.m.Handler())
	t.Cleanup(func() {
		vm.srv.Close()
		vm.m.Close()
	})
	for _, f := range []string{"vmlinux", "rootfs.ext4", "overlay.ext4"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("dummy "+f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return vm
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// call sends one request and returns the status and the body.
func (vm *testVM) call(method, path, body string) (int, string) {
	vm.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(vm.t.Context(), method, vm.srv.URL+path, rd)
	if err != nil {
		vm.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		vm.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// step is one API call and what it must answer.
type step struct {
	method, path, body string
	status             int
	// want is a substring of the answer's body (the fault_message of a
	// refusal); empty checks nothing.
	want string
}

func (vm *testVM) run(steps []step) {
	vm.t.Helper()
	for i, s := range steps {
		status, body := vm.call(s.method, s.path, s.body)
		if status != s.status {
			vm.t.Fatalf("step %d %s %s: got status %d (%s), want %d", i, s.method, s.path, status, body, s.status)
		}
		if status >= 400 {
			var f struct {
				FaultMessage string `json:"fault_message"`
			}
			if err := json.Unmarshal([]byte(body), &f); err != nil || f.FaultMessage == "" {
				vm.t.Fatalf("step %d %s %s: got body %q, want {\"fault_message\": ...}", i, s.method, s.path, body)
			}
		}
		if s.want != "" && !strings.Contains(body, s.want) {
			vm.t.Fatalf("step %d %s %s: got body %q, want it to contain %q", i, s.method, s.path, body, s.want)
		}
	}
}

// configure is the pre-boot configuration kici's backend makes.
var configure = []step{
	{"PUT", "/machine-config", `{"vcpu_count": 2, "mem_size_mib": 256, "smt": false}`, 204, ""},
	{"PUT", "/boot-source", `{"kernel_image_path": "/vmlinux", "boot_args": "console=ttyS0 reboot=k panic=1 ip=10.0.0.2::10.0.0.1:255.255.255.0::eth0:off"}`, 204, ""},
	{"PUT", "/drives/rootfs", `{"drive_id": "rootfs", "path_on_host": "/rootfs.ext4", "is_root_device": true, "is_read_only": true}`, 204, ""},
	{"PUT", "/drives/overlay", `{"drive_id": "overlay", "path_on_host": "/overlay.ext4", "is_root_device": false, "is_read_only": false}`, 204, ""},
	{"PUT", "/network-interfaces/eth0", `{"iface_id": "eth0", "host_dev_name": "kici-00000002", "guest_mac": "06:00:AC:00:00:02"}`, 204, ""},
	{"PUT", "/mmds/config", `{"version": "V2", "network_interfaces": ["eth0"]}`, 204, ""},
	{"PUT", "/mmds", `{"latest": {"meta-data": {"kici-agent-id": "vm-1"}}}`, 204, ""},
}

func TestMachineLifecycle(t *testing.T) {
	t.Parallel()
	vm := newTestVM(t, t.TempDir())
	vm.run([]step{
		{"GET", "/", "", 200, `"state":"Not started"`},
		{"GET", "/machine-config", "", 200, `"vcpu_count":1,"mem_size_mib":128`},
	})
	vm.run(configure)
	vm.run([]step{
		{"GET", "/machine-config", "", 200, `"vcpu_count":2,"mem_size_mib":256`},
		{"PUT", "/actions", `{"action_type": "InstanceStart"}`, 204, ""},
		{"GET", "/", "", 200, `"state":"Running"`},
		{"GET", "/", "", 200, `"app_name":"Firecracker"`},
		// Pre-boot calls are refused after boot.
		{"PUT", "/boot-source", `{"kernel_image_path": "/vmlinux"}`, 400, "not supported after starting the microVM"},
		{"PUT", "/machine-config", `{"vcpu_count": 1, "mem_size_mib": 128}`, 400, "not supported after starting the microVM"},
		{"PUT", "/drives/rootfs", `{"drive_id": "rootfs", "path_on_host": "/rootfs.ext4", "is_root_device": true, "is_read_only": true}`, 400, "not supported after starting the microVM"},
		{"PUT", "/network-interfaces/eth1", `{"iface_id": "eth1", "host_dev_name": "kici-00000003"}`, 400, "not supported after starting the microVM"},
		{"PUT", "/mmds/config", `{"version": "V2", "network_interfaces": ["eth0"]}`, 400, "not supported after starting the microVM"},
		{"PUT", "/actions", `{"action_type": "InstanceStart"}`, 400, "not supported after starting the microVM"},
		{"PUT", "/logger", `{"level": "Info"}`, 400, "not supported after starting the microVM"},
		// The data store and the post-boot calls work.
		{"PATCH", "/mmds", `{"latest": {"meta-data": {"kici-agent-token": "t0k"}}}`, 204, ""},
		{"GET", "/mmds", "", 200, `{"latest":{"meta-data":{"kici-agent-id":"vm-1","kici-agent-token":"t0k"}}}`},
		{"PATCH", "/drives/overlay", `{"drive_id": "overlay", "path_on_host": "/rootfs.ext4"}`, 204, ""},
		{"PATCH", "/drives/nope", `{"drive_id": "nope"}`, 400, "Unable to patch the block device"},
		{"PATCH", "/network-interfaces/eth0", `{"iface_id": "eth0"}`, 204, ""},
		{"PUT", "/actions", `{"action_type": "FlushMetrics"}`, 204, ""},
		{"PUT", "/snapshot/create", `{"snapshot_path": "/snap", "mem_file_path": "/mem"}`, 400, "Create snapshot error"},
		{"PATCH", "/vm", `{"state": "Paused"}`, 204, ""},
		{"GET", "/", "", 200, `"state":"Paused"`},
		{"PATCH", "/vm", `{"state": "Resumed"}`, 204, ""},
		{"GET", "/", "", 200, `"state":"Running"`},
		{"PUT", "/actions", `{"action_type": "SendCtrlAltDel"}`, 204, ""},
		// A paused guest gets the key press when it resumes.
		{"PATCH", "/vm", `{"state": "Paused"}`, 204, ""},
		{"PUT", "/actions", `{"action_type": "SendCtrlAltDel"}`, 204, ""},
		{"PATCH", "/vm", `{"state": "Resumed"}`, 204, ""},
	})
	specs, guests := vm.booter.booted()
	if len(specs) != 1 {
		t.Fatalf("got %d boots, want 1", len(specs))
	}
	got := specs[0]
	if got.IP == nil || got.IP.Addr.String() != "10.0.0.2/24" || got.IP.Gateway.String() != "10.0.0.1" || got.IP.Device != "eth0" {
		t.Errorf("got ip config %+v, want 10.0.0.2/24 via 10.0.0.1 on eth0", got.IP)
	}
	if len(got.NICs) != 1 || got.NICs[0].GuestMAC != "06:00:AC:00:00:02" || got.NICs[0].Tap == nil {
		t.Errorf("got NICs %+v, want eth0 with its MAC and opened TAP", got.NICs)
	}
	if got.MMDS == nil || got.MMDSAddr.String() != "169.254.169.254" {
		t.Errorf("got MMDS %v at %v, want a server at 169.254.169.254", got.MMDS, got.MMDSAddr)
	}
	if diff := cmp.Diff([]string{"pause", "resume", "ctrlaltdel", "pause", "resume", "ctrlaltdel"}, guests[0].Calls()); diff != "" {
		t.Errorf("guest calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"kici-00000002"}, vm.taps); diff != "" {
		t.Errorf("TAPs opened (-want +got):\n%s", diff)
	}

	// The guest powers off: the machine ends with exit code 0.
	select {
	case <-vm.m.Done():
		t.Fatal("the machine ended before its guest powered off")
	default:
	}
	close(guests[0].done)
	if code := vm.m.ExitCode(); code != 0 {
		t.Errorf("got exit code %d after the power-off, want 0", code)
	}
}

func TestMachineRefusals(t *testing.T) {
	t.Parallel()
	long := `{"latest": "` + strings.Repeat("x", 60000) + `"}`
	tests := []struct {
		name  string
		setup []step
		step  step
	}{
		{name: "post-boot call before boot", step: step{"PATCH", "/vm", `{"state": "Paused"}`, 400, "not supported before starting the microVM"}},
		{name: "ctrl-alt-del before boot", step: step{"PUT", "/actions", `{"action_type": "SendCtrlAltDel"}`, 400, "not supported before starting the microVM"}},
		{name: "flush metrics before boot", step: step{"PUT", "/actions", `{"action_type": "FlushMetrics"}`, 400, "not supported before starting the microVM"}},
		{name: "snapshot create before boot", step: step{"PUT", "/snapshot/create", `{"snapshot_path": "/s", "mem_file_path": "/m"}`, 400, "not supported before starting the microVM"}},
		{name: "patch drive before boot", step: step{"PATCH", "/drives/rootfs", `{"drive_id": "rootfs"}`, 400, "not supported before starting the microVM"}},
		{name: "start without kernel", step: step{"PUT", "/actions", `{"action_type": "InstanceStart"}`, 400, "Cannot start microvm without kernel configuration."}},
		{name: "start without root drive", setup: configure[:2], step: step{"PUT", "/actions", `{"action_type": "InstanceStart"}`, 400, "no root block device"}},
		{name: "unknown action", step: step{"PUT", "/actions", `{"action_type": "Reboot"}`, 400, "unknown variant `Reboot`"}},
		{name: "missing kernel file", step: step{"PUT", "/boot-source", `{"kernel_image_path": "/nope"}`, 400, "The kernel file cannot be opened: No such file or directory (os error 2)"}},
		{name: "missing drive file", step: step{"PUT", "/drives/d", `{"drive_id": "d", "path_on_host": "/nope", "is_root_device": false}`, 400, "Unable to create the virtio block device"}},
		{name: "second root drive", setup: configure[2:3], step: step{"PUT", "/drives/other", `{"drive_id": "other", "path_on_host": "/overlay.ext4", "is_root_device": true}`, 400, "A root block device already exists!"}},
		{name: "drive id mismatch", step: step{"PUT", "/drives/a", `{"drive_id": "b", "path_on_host": "/rootfs.ext4", "is_root_device": true}`, 400, "The id from the path does not match the id from the body!"}},
		{name: "bad resource id", step: step{"PUT", "/drives/a-b", `{"drive_id": "a-b", "is_root_device": true}`, 400, "API Resource IDs can only contain alphanumeric characters and underscores."}},
		{name: "empty resource id", step: step{"PUT", "/drives", `{"drive_id": "a", "is_root_device": true}`, 400, "The ID cannot be empty."}},
		{name: "iface id mismatch", step: step{"PUT", "/network-interfaces/eth0", `{"iface_id": "eth1", "host_dev_name": "t"}`, 400, "does not match the id from the body"}},
		{name: "tap that cannot open", step: step{"PUT", "/network-interfaces/eth0", `{"iface_id": "eth0", "host_dev_name": "missing0"}`, 400, "Open tap device failed"}},
		{name: "duplicate MAC", setup: configure[4:5], step: step{"PUT", "/network-interfaces/eth1", `{"iface_id": "eth1", "host_dev_name": "t1", "guest_mac": "06:00:ac:00:00:02"}`, 400, "The MAC address is already in use"}},
		{name: "mmds on unknown iface", step: step{"PUT", "/mmds/config", `{"version": "V2", "network_interfaces": ["eth0"]}`, 400, "does not correspond to any existing network interface"}},
		{name: "mmds not link-local", setup: configure[4:5], step: step{"PUT", "/mmds/config", `{"network_interfaces": ["eth0"], "ipv4_address": "10.0.0.9"}`, 400, "is not link local"}},
		{name: "mmds empty iface list", step: step{"PUT", "/mmds/config", `{"network_interfaces": []}`, 400, "is empty"}},
		{name: "patch mmds before put", step: step{"PATCH", "/mmds", `{"a": 1}`, 400, "The MMDS data store is not initialized."}},
		{name: "mmds too large", setup: []step{{"PUT", "/mmds", `{"a": "` + strings.Repeat("x", 30000) + `"}`, 204, ""}}, step: step{"PATCH", "/mmds", `{"b": "` + strings.Repeat("x", 30000) + `"}`, 413, "MMDS limit exceeded error: The MMDS patch request doesn't fit."}},
		{name: "payload too large", step: step{"PUT", "/mmds", long, 400, "is larger than the limit of 51200"}},
		{name: "bad vcpu count", step: step{"PUT", "/machine-config", `{"vcpu_count": 33, "mem_size_mib": 128}`, 400, "The number of vCPUs"}},
		{name: "odd vcpus with smt", step: step{"PUT", "/machine-config", `{"vcpu_count": 3, "mem_size_mib": 128, "smt": true}`, 400, "The number of vCPUs"}},
		{name: "missing required field", step: step{"PUT", "/machine-config", `{"vcpu_count": 2}`, 400, "missing field `mem_size_mib`"}},
		{name: "empty patch", step: step{"PATCH", "/machine-config", `{}`, 400, "Empty PATCH request."}},
		{name: "unknown field", step: step{"PUT", "/boot-source", `{"kernel_image_path": "/vmlinux", "kernel": "x"}`, 400, "An error occurred when deserializing the json body of a request"}},
		{name: "bad json", step: step{"PUT", "/machine-config", `{"vcpu_count": `, 400, "An error occurred when deserializing the json body of a request"}},
		{name: "trailing data", step: step{"PUT", "/machine-config", `{"vcpu_count": 1, "mem_size_mib": 128} {}`, 400, "trailing characters"}},
		{name: "empty put", step: step{"PUT", "/machine-config", "", 400, "Empty PUT request."}},
		{name: "get with body", step: step{"GET", "/", `{}`, 400, "GET request cannot have a body."}},
		{name: "unknown path", step: step{"GET", "/nope", "", 400, "Invalid request method and/or path: GET nope."}},
		{name: "wrong method", step: step{"POST", "/actions", `{"action_type": "InstanceStart"}`, 400, "Invalid request method and/or path: POST actions."}},
		{name: "unimplemented device", step: step{"PUT", "/vsock", `{"guest_cid": 3, "uds_path": "/v.sock"}`, 400, "not implemented by the fake"}},
		{name: "load with both memory fields", step: step{"PUT", "/snapshot/load", `{"snapshot_path": "/s", "mem_file_path": "/m", "mem_backend": {"backend_type": "File", "backend_path": "/m"}}`, 400, "too many fields"}},
		{name: "load without memory", step: step{"PUT", "/snapshot/load", `{"snapshot_path": "/s"}`, 400, "either `mem_backend` or `mem_file_path` is required"}},
		{name: "load after configuring", setup: configure[:1], step: step{"PUT", "/snapshot/load", `{"snapshot_path": "/s", "mem_backend": {"backend_type": "File", "backend_path": "/m"}}`, 400, "Loading a microVM snapshot not allowed after configuring boot-specific resources."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vm := newTestVM(t, t.TempDir())
			vm.run(tt.setup)
			vm.run([]step{tt.step})
			vm.run([]step{{"GET", "/", "", 200, `"state":"Not started"`}})
		})
	}
}

func TestMachineSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	src := newTestVM(t, root)
	src.run(configure)
	src.run([]step{
		{"PUT", "/actions", `{"action_type": "InstanceStart"}`, 204, ""},
		{"PATCH", "/vm", `{"state": "Paused"}`, 204, ""},
		{"PUT", "/snapshot/create", `{"snapshot_type": "Full", "snapshot_path": "/vm.snap", "mem_file_path": "/vm.mem"}`, 204, ""},
	})
	for _, f := range []string{"vm.snap", "vm.mem"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("snapshot file %s: %v", f, err)
		}
	}

	dst := newTestVM(t, root)
	dst.run([]step{
		{"PUT", "/logger", `{"level": "Debug"}`, 204, ""}, // not a boot-specific resource
		{"PUT", "/snapshot/load", `{"snapshot_path": "/vm.snap", "mem_backend": {"backend_type": "File", "backend_path": "/vm.mem"}, "network_overrides": [{"iface_id": "eth0", "host_dev_name": "kici-0000000a"}]}`, 204, ""},
		{"GET", "/", "", 200, `"state":"Paused"`},
		{"GET", "/vm/config", "", 200, `"host_dev_name":"kici-0000000a"`},
		{"GET", "/machine-config", "", 200, `"vcpu_count":2,"mem_size_mib":256`},
		// The MMDS config is restored, its data is not.
		{"GET", "/mmds", "", 200, `{}`},
		{"PUT", "/mmds", `{"latest": {"meta-data": {"again": "yes"}}}`, 204, ""},
		{"PUT", "/actions", `{"action_type": "InstanceStart"}`, 400, "not supported after starting the microVM"},
	})
	if specs, _ := dst.booter.booted(); len(specs) != 0 {
		t.Fatalf("got %d boots before the resume, want 0", len(specs))
	}
	dst.run([]step{
		{"PATCH", "/vm", `{"state": "Resumed"}`, 204, ""},
		{"GET", "/", "", 200, `"state":"Running"`},
	})
	specs, _ := dst.booter.booted()
	if len(specs) != 1 || specs[0].IP == nil || specs[0].IP.Addr.String() != "10.0.0.2/24" || specs[0].MMDS == nil {
		t.Fatalf("got boots %+v, want one from the snapshot's config with MMDS", specs)
	}
	if diff := cmp.Diff([]string{"kici-0000000a"}, dst.taps); diff != "" {
		t.Errorf("TAPs opened after the override (-want +got):\n%s", diff)
	}

	// resume_vm boots at the load.
	now := newTestVM(t, root)
	now.run([]step{
		{"PUT", "/snapshot/load", `{"snapshot_path": "/vm.snap", "mem_file_path": "/vm.mem", "resume_vm": true}`, 204, ""},
		{"GET", "/", "", 200, `"state":"Running"`},
	})
	if specs, _ := now.booter.booted(); len(specs) != 1 {
		t.Fatalf("got %d boots after a load with resume_vm, want 1", len(specs))
	}
}

func TestMachineFailedLoadEndsTheProcess(t *testing.T) {
	t.Parallel()
	vm := newTestVM(t, t.TempDir())
	vm.run([]step{{"PUT", "/snapshot/load", `{"snapshot_path": "/none.snap", "mem_file_path": "/none.mem"}`, 400, "Failed to restore from snapshot"}})
	if code := vm.m.ExitCode(); code != 1 {
		t.Errorf("got exit code %d after a failed load, want 1", code)
	}
}

func TestMachineConfigFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	vm := newTestVM(t, root)
	doc := `{
	  "boot-source": {"kernel_image_path": "/vmlinux", "boot_args": "console=ttyS0 ip=10.0.0.7::10.0.0.1:255.255.255.0::eth0:off"},
	  "drives": [{"drive_id": "rootfs", "path_on_host": "/rootfs.ext4", "is_root_device": true, "is_read_only": true}],
	  "machine-config": {"vcpu_count": 1, "mem_size_mib": 128, "smt": false},
	  "network-interfaces": [{"iface_id": "eth0", "host_dev_name": "kici-00000007", "guest_mac": "06:00:AC:00:00:07"}],
	  "mmds-config": {"version": "V2", "network_interfaces": ["eth0"]}
	}`
	if err := vm.m.ApplyConfigFile(t.Context(), []byte(doc), []byte(`{"latest": {"meta-data": {"k": "v"}}}`)); err != nil {
		t.Fatalf("apply the config file: %v", err)
	}
	vm.run([]step{
		{"GET", "/", "", 200, `"state":"Running"`},
		{"GET", "/mmds", "", 200, `{"latest":{"meta-data":{"k":"v"}}}`},
	})
	specs, _ := vm.booter.booted()
	if len(specs) != 1 || specs[0].IP.Addr.String() != "10.0.0.7/24" {
		t.Fatalf("got boots %+v, want one at 10.0.0.7/24", specs)
	}
	if err := newTestVM(t, root).m.ApplyConfigFile(t.Context(), []byte(`{"boot-source": {"kernel_image_path": "/vmlinux"}, "vsock": {"guest_cid": 3, "uds_path": "/v"}}`), nil); err == nil {
		t.Error("got nil applying a config with a vsock, want an error")
	}
}

func TestMachineMetricsAndLogger(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	vm := newTestVM(t, root)
	vm.run([]step{
		{"PUT", "/logger", `{"log_path": "/vmm.log", "level": "Info", "show_level": true}`, 204, ""},
		{"PUT", "/logger", `{"level": "Loud"}`, 400, "unknown variant `Loud`"},
		{"PUT", "/metrics", `{"metrics_path": "/metrics.json"}`, 204, ""},
		{"PUT", "/metrics", `{"metrics_path": "/metrics.json"}`, 400, "Reinitialization of metrics not allowed."},
		{"PUT", "/actions", `{"action_type": "InstanceStart"}`, 400, ""}, // logged to vmm.log
	})
	vm.run(configure)
	vm.run([]step{
		{"PUT", "/actions", `{"action_type": "InstanceStart"}`, 204, ""},
		{"PUT", "/actions", `{"action_type": "FlushMetrics"}`, 204, ""},
	})
	b, err := os.ReadFile(filepath.Join(root, "vmm.log"))
	if err != nil || !bytes.Contains(b, []byte("the guest booted")) {
		t.Errorf("got vmm.log %q (%v), want the boot logged", b, err)
	}
	b, err = os.ReadFile(filepath.Join(root, "metrics.json"))
	if err != nil || !json.Valid(bytes.TrimSpace(b)) {
		t.Errorf("got metrics %q (%v), want one JSON line", b, err)
	}
}
