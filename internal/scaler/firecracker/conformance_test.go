package firecracker

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	"github.com/kici-dev/kici/internal/scaler/scalertest"
	"github.com/kici-dev/kici/internal/store"
	"github.com/kici-dev/kici/internal/testsvc"
)

// The tests run in a network namespace of the test binary's own: the
// bridge, TAPs and nftables table they make die with it.
func TestMain(m *testing.M) { testsvc.MainInNetNS(m) }

// Test network: a bridge and pool no host uses.
var testNet = hostnet.Config{
	Bridge:  "kicitest0",
	Gateway: netip.MustParseAddr("10.77.0.1"),
	Prefix:  netip.MustParsePrefix("10.77.0.0/24"),
	Table:   "kici_test",
}

// testUID is the jailer's uid and gid in the tests.
const testUID = 10000

// world is what every test of the package shares: the binaries (the
// named fakes and kici-agent, built once), the host side and its store.
type world struct {
	bin  string // holds fakes/firecracker, fakes/jailer and kici-agent
	host *Host
	db   *store.DB
	err  error
}

var (
	worldOnce sync.Once
	shared    world
)

// testWorld builds the binaries and prepares the host network once.
func testWorld(t testing.TB) *world {
	t.Helper()
	testsvc.NetNS(t)
	worldOnce.Do(func() { shared.err = shared.build() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return &shared
}

func (w *world) build() error {
	dir, err := os.MkdirTemp("", "kici-fc-test-")
	if err != nil {
		return err
	}
	w.bin = dir
	for out, pkg := range map[string]string{
		"fakes/firecracker": "github.com/kici-dev/kici/cmd/fakes/firecracker",
		"fakes/jailer":      "github.com/kici-dev/kici/cmd/fakes/jailer",
		"kici-agent":        "github.com/kici-dev/kici/cmd/kici-agent",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
		}
	}
	w.db, err = store.Open(context.Background(), store.Config{DataDir: filepath.Join(dir, "data"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	if err := w.db.Migrate(context.Background()); err != nil {
		return err
	}
	w.host, err = NewHost(nil, HostConfig{
		Network: testNet, Netmask: netip.MustParseAddr("255.255.255.0"), AutoProvision: true,
		Addresses: StoreAddresses(w.db, "test/"+testNet.Bridge, testNet.Prefix, testNet.Gateway),
	})
	if err != nil {
		return err
	}
	return w.host.Prepare(context.Background())
}

// orchestrator starts the harness's small orchestrator on the gateway and
// opens its port to the guests.
func (w *world) orchestrator(t testing.TB) *scalertest.Orchestrator {
	t.Helper()
	o := scalertest.NewOrchestrator(t, testNet.Gateway.String(), 30*time.Second)
	if err := w.host.OpenHostPort(context.Background(), o.Port()); err != nil {
		t.Fatal(err)
	}
	return o
}

// guestFiles makes a kernel and a rootfs (placeholders: the fake VMM boots
// no kernel) in dir.
func guestFiles(t testing.TB, dir string) (kernel, rootfs string) {
	t.Helper()
	kernel, rootfs = filepath.Join(dir, "vmlinux"), filepath.Join(dir, "rootfs.ext4")
	for _, p := range []string{kernel, rootfs} {
		if err := os.WriteFile(p, []byte("placeholder of the fake VMM\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return kernel, rootfs
}

// newBackend is a backend on the shared host with its chroot base in
// stateDir.
func (w *world) newBackend(t testing.TB, stateDir string) *Backend {
	t.Helper()
	kernel, _ := guestFiles(t, stateDir)
	b, err := New(slog.New(slog.NewTextHandler(t.Output(), nil)), Config{
		Name: "conformance", Host: w.host,
		FirecrackerPath: filepath.Join(w.bin, "fakes/firecracker"), JailerPath: filepath.Join(w.bin, "fakes/jailer"),
		KernelPath: kernel, UID: testUID, GID: testUID, ChrootBaseDir: filepath.Join(stateDir, "jail"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testLabelSet(t testing.TB, dir string) scaler.LabelSet {
	_, rootfs := guestFiles(t, dir)
	return scaler.LabelSet{
		Labels:      []string{"fc", "linux"},
		Firecracker: scaler.FirecrackerGuest{RootfsPath: rootfs, OverlayDriveSizeMib: 8},
	}
}

// hostLeftovers lists every TAP of the pattern, per-VM rule and lease on
// the shared host.
func (w *world) hostLeftovers(t testing.TB) []string {
	var out []string
	taps, err := w.host.net.Taps(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tap := range taps {
		out = append(out, "TAP "+tap)
	}
	ruled, err := w.host.net.VMAddrs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ruled {
		out = append(out, "rules of "+a.String())
	}
	leases, err := w.host.addrs.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		out = append(out, "lease of "+l.Addr.String()+" by "+l.VMID)
	}
	return out
}

// leftovers lists what a VM left on the host: its dir, TAP, rules, lease.
func (w *world) leftovers(t *testing.T, stateDir, agentID string) []string {
	var out []string
	dir := filepath.Join(stateDir, "jail", "firecracker", agentID)
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "VM dir "+dir)
	}
	if _, err := netlink.LinkByName(hostnet.TapName(agentID)); err == nil {
		out = append(out, "TAP "+hostnet.TapName(agentID))
	}
	leases, err := w.host.addrs.Leases(context.Background())
	if err != nil {
		return append(out, "cannot list leases: "+err.Error())
	}
	ruled, err := w.host.net.VMAddrs(context.Background())
	if err != nil {
		return append(out, "cannot list rules: "+err.Error())
	}
	for _, l := range leases {
		if l.VMID == agentID {
			out = append(out, "lease of "+l.Addr.String())
			if slices.Contains(ruled, l.Addr) {
				out = append(out, "rules of "+l.Addr.String())
			}
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	w := testWorld(t)
	scalertest.Run(t, scalertest.Harness{
		New:          func(t *testing.T, stateDir string) scaler.Backend { return w.newBackend(t, stateDir) },
		LabelSet:     func(t *testing.T) scaler.LabelSet { return testLabelSet(t, t.TempDir()) },
		LocalProcess: true,
		// The identity keys come from MMDS and win over the label set's
		// env, so the agent is made to fail another way.
		FailEnv:    map[string]string{"KICI_AGENT_CONCURRENCY": "0"},
		FailOutput: `KICI_AGENT_CONCURRENCY="0": want at least 1`,
		Leftovers:  w.leftovers,
		ListenHost: testNet.Gateway.String(),
		Listening: func(t *testing.T, port uint16) {
			if err := w.host.OpenHostPort(t.Context(), port); err != nil {
				t.Fatal(err)
			}
		},
	})
}
