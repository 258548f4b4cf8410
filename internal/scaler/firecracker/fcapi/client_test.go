package fcapi_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/fakes/fakevm"
	"github.com/kici-dev/kici/internal/scaler/firecracker/fcapi"
)

// serve serves h on a unix socket in a temporary directory and returns the
// socket's path.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	return serveAt(t, filepath.Join(t.TempDir(), "api.sock"), h)
}

// serveAt serves h on the unix socket sock.
func serveAt(t *testing.T, sock string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// nopTap is a host TAP that carries nothing.
type nopTap struct{ closed chan struct{} }

func (n nopTap) Read([]byte) (int, error)    { <-n.closed; return 0, io.EOF }
func (n nopTap) Write(p []byte) (int, error) { return len(p), nil }
func (n nopTap) Close() error                { close(n.closed); return nil }

// nopGuest is a guest that never powers off by itself.
type nopGuest struct {
	mu    sync.Mutex
	calls []string
	done  chan struct{}
}

func (g *nopGuest) rec(s string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, s)
	return nil
}
func (g *nopGuest) Pause() error          { return g.rec("pause") }
func (g *nopGuest) Resume() error         { return g.rec("resume") }
func (g *nopGuest) CtrlAltDel() error     { return g.rec("ctrlaltdel") }
func (g *nopGuest) Done() <-chan struct{} { return g.done }

type booter struct {
	mu    sync.Mutex
	specs []fakevm.GuestSpec
	guest *nopGuest
}

func (b *booter) BootGuest(_ context.Context, spec fakevm.GuestSpec) (fakevm.Guest, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.specs = append(b.specs, spec)
	b.guest = &nopGuest{done: make(chan struct{})}
	return b.guest, nil
}

// newFake starts a fake VMM (the Firecracker API of internal/fakes/fakevm)
// with its files in a temporary directory.
func newFake(t *testing.T) (*fcapi.Client, *booter, string) {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{"vmlinux", "rootfs.ext4"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := &booter{}
	m := fakevm.NewMachine(fakevm.Config{
		ID: "vm-1", Root: root, Guest: b,
		OpenTap: func(string) (fakevm.Tap, error) { return nopTap{closed: make(chan struct{})}, nil },
	})
	t.Cleanup(func() { m.Close() })
	c := fcapi.New(serve(t, m.Handler()))
	t.Cleanup(c.Close)
	return c, b, root
}

func TestClientDrivesTheAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, b, root := newFake(t)

	info, err := c.Describe(ctx)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	if diff := cmp.Diff(fcapi.InstanceInfo{ID: "vm-1", State: fcapi.StateNotStarted, VMMVersion: fakevm.Version, AppName: "Firecracker"}, info); diff != "" {
		t.Errorf("instance info (-want +got):\n%s", diff)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"machine config", func() error { return c.PutMachineConfig(ctx, fcapi.MachineConfig{VCPUCount: 2, MemSizeMib: 512}) }},
		{"boot source", func() error {
			return c.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: "/vmlinux", BootArgs: "ip=10.0.0.2::10.0.0.1:255.255.255.0::eth0:off"})
		}},
		{"root drive", func() error {
			return c.PutDrive(ctx, fcapi.Drive{DriveID: "rootfs", PathOnHost: "/rootfs.ext4", IsRootDevice: true, IsReadOnly: true})
		}},
		{"network interface", func() error {
			return c.PutNetworkInterface(ctx, fcapi.NetworkInterface{IfaceID: "eth0", HostDevName: "kici-00000002", GuestMAC: "06:00:AC:00:00:02"})
		}},
		{"mmds config", func() error {
			return c.PutMMDSConfig(ctx, fcapi.MMDSConfig{Version: fcapi.MMDSVersion2, NetworkInterfaces: []string{"eth0"}})
		}},
		{"mmds put", func() error {
			return c.PutMMDS(ctx, map[string]any{"latest": map[string]any{"meta-data": map[string]string{"a": "1"}}})
		}},
		{"start", func() error { return c.Action(ctx, fcapi.InstanceStart) }},
		{"mmds patch", func() error {
			return c.PatchMMDS(ctx, map[string]any{"latest": map[string]any{"meta-data": map[string]any{"a": nil, "b": "2"}}})
		}},
		{"pause", func() error { return c.PatchVM(ctx, fcapi.VMPaused) }},
		{"snapshot", func() error {
			return c.CreateSnapshot(ctx, fcapi.SnapshotCreate{SnapshotPath: "/vm.snap", MemFilePath: "/vm.mem"})
		}},
		{"resume", func() error { return c.PatchVM(ctx, fcapi.VMResumed) }},
		{"flush metrics", func() error { return c.Action(ctx, fcapi.FlushMetrics) }},
		{"ctrl-alt-del", func() error { return c.Action(ctx, fcapi.SendCtrlAltDel) }},
	}
	for _, s := range calls {
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	var md map[string]map[string]map[string]string
	if err := c.GetMMDS(ctx, &md); err != nil {
		t.Fatalf("get mmds: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"b": "2"}, md["latest"]["meta-data"]); diff != "" {
		t.Errorf("mmds after the patch (-want +got):\n%s", diff)
	}
	if info, err := c.Describe(ctx); err != nil || info.State != fcapi.StateRunning {
		t.Errorf("got %+v, %v after the resume, want state Running", info, err)
	}
	if _, err := os.Stat(filepath.Join(root, "vm.snap")); err != nil {
		t.Errorf("snapshot file: %v", err)
	}
	if diff := cmp.Diff([]string{"pause", "resume", "ctrlaltdel"}, b.guest.calls); diff != "" {
		t.Errorf("guest calls (-want +got):\n%s", diff)
	}
	if len(b.specs) != 1 || b.specs[0].NICs[0].GuestMAC != "06:00:AC:00:00:02" {
		t.Errorf("got boots %+v, want one with eth0's MAC", b.specs)
	}

	// A pre-boot call after boot: a typed refusal with Firecracker's text.
	err = c.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: "/vmlinux"})
	var ae *fcapi.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want an *APIError", err)
	}
	if ae.Status != http.StatusBadRequest || !strings.Contains(ae.FaultMessage, "not supported after starting the microVM") {
		t.Errorf("got %d %q, want 400 with the post-boot fault", ae.Status, ae.FaultMessage)
	}
	if !fcapi.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("IsStatus(%v, 400) = false, want true", err)
	}
}

func TestClientLoadsASnapshot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src, _, root := newFake(t)
	steps := []error{
		src.PutBootSource(ctx, fcapi.BootSource{KernelImagePath: "/vmlinux"}),
		src.PutDrive(ctx, fcapi.Drive{DriveID: "rootfs", PathOnHost: "/rootfs.ext4", IsRootDevice: true}),
		src.PutNetworkInterface(ctx, fcapi.NetworkInterface{IfaceID: "eth0", HostDevName: "tap-old"}),
		src.Action(ctx, fcapi.InstanceStart),
		src.PatchVM(ctx, fcapi.VMPaused),
		src.CreateSnapshot(ctx, fcapi.SnapshotCreate{SnapshotType: "Full", SnapshotPath: "/s", MemFilePath: "/m"}),
	}
	if err := errors.Join(steps...); err != nil {
		t.Fatalf("make the snapshot: %v", err)
	}
	// A second VMM in the same directory loads it.
	b := &booter{}
	m := fakevm.NewMachine(fakevm.Config{ID: "vm-2", Root: root, Guest: b,
		OpenTap: func(string) (fakevm.Tap, error) { return nopTap{closed: make(chan struct{})}, nil }})
	t.Cleanup(func() { m.Close() })
	dst := fcapi.New(serve(t, m.Handler()))
	err := dst.LoadSnapshot(ctx, fcapi.SnapshotLoad{
		SnapshotPath: "/s", MemBackend: &fcapi.MemBackend{BackendType: "File", BackendPath: "/m"}, ResumeVM: true,
		NetworkOverrides: []fcapi.NetworkOverride{{IfaceID: "eth0", HostDevName: "tap-new"}},
	})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if info, err := dst.Describe(ctx); err != nil || info.State != fcapi.StateRunning {
		t.Errorf("got %+v, %v, want state Running after a load with resume_vm", info, err)
	}
}

func TestAPIErrorBodies(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("e", 100<<10)
	sock := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/mmds":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, huge)
		default:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"fault_message": "The requested operation is not supported before starting the microVM."}`)
		}
	}))
	c := fcapi.New(sock)
	defer c.Close()
	err := c.PatchVM(t.Context(), fcapi.VMPaused)
	want := &fcapi.APIError{Method: "PATCH", Path: "/vm", Status: 400, FaultMessage: "The requested operation is not supported before starting the microVM."}
	var ae *fcapi.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want an *APIError", err)
	}
	if diff := cmp.Diff(want, ae); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(err.Error(), "firecracker api PATCH /vm: 400 Bad Request") {
		t.Errorf("got message %q", err.Error())
	}
	// A body that is not a fault document is kept, bounded to 64 KiB.
	err = c.PutMMDS(t.Context(), map[string]string{})
	if !errors.As(err, &ae) || ae.Status != 500 || len(ae.FaultMessage) != 64<<10 {
		t.Fatalf("got %v (fault of %d bytes), want a 500 with a 64 KiB fault", err, len(ae.FaultMessage))
	}
	if err := c.PutDrive(t.Context(), fcapi.Drive{}); err == nil {
		t.Error("got nil for a drive without an id, want an error")
	}
}

func TestWaitReady(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "api.sock")
	// Nothing listens: WaitReady gives up when ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := fcapi.WaitReady(ctx, sock, 5*time.Millisecond); err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("got %v with no server, want an error naming the socket", err)
	}
	// The API answers only from the fourth poll on.
	var mu sync.Mutex
	polls := 0
	serveAt(t, sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		polls++
		n := polls
		mu.Unlock()
		if n < 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"id": "vm-1", "state": "Not started", "vmm_version": "1.13.1", "app_name": "Firecracker"}`)
	}))
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := fcapi.WaitReady(ctx, sock, time.Millisecond); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if polls != 4 {
		t.Errorf("got %d polls, want 4 (until the first answer)", polls)
	}
}
