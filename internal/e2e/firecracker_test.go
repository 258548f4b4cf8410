package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/scaler/firecracker/hostnet"
	"github.com/kici-dev/kici/internal/store"
)

// The firecracker tests run the real orchestrator and the named fakes of
// firecracker and the jailer (cmd/fakes) inside a network namespace of
// each test's own: the bridge, TAPs, nftables table, the guest's relayed
// traffic are all real, and all die with the namespace. The guest's
// kici-agent reads MMDS and dials the bridge's gateway. SQLite only: the
// test's PostgreSQL listens on the host's loopback, which the namespace
// does not reach.

var (
	fakesOnce sync.Once
	fakesErr  error
	fcNet     atomic.Int32 // hands each test its own subnet
)

// fakesBin builds the fakes beside kici-agent (bin/fakes/, as `make fakes`
// does), so the fake jailer finds the guest's agent at ../kici-agent.
func fakesBin(t *testing.T) string {
	t.Helper()
	fakesOnce.Do(func() {
		for _, b := range []string{"firecracker", "jailer"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "fakes", b), "github.com/kici-dev/kici/cmd/fakes/"+b)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				fakesErr = fmt.Errorf("build fake %s: %v\n%s", b, err, out)
				return
			}
		}
	})
	if fakesErr != nil {
		t.Fatal(fakesErr)
	}
	return filepath.Join(binDir, "fakes")
}

// fcWorld is one test's namespace, network block and guest files.
type fcWorld struct {
	ns      *netNS
	n       int    // the test's subnet: 10.<90+n>.0.0/24
	base    string // chroot base dir
	kernel  string
	rootfs  string
	gateway string
	bridge  string
	table   string
}

func newFCWorld(t *testing.T) *fcWorld {
	t.Helper()
	fakesBin(t)
	n := int(fcNet.Add(1))
	w := &fcWorld{ns: newNetNS(t), n: n, base: filepath.Join(t.TempDir(), "jail"),
		gateway: fmt.Sprintf("10.%d.0.1", 90+n), bridge: fmt.Sprintf("kicie2e%d", n), table: fmt.Sprintf("kici_e2e%d", n)}
	dir := t.TempDir()
	w.kernel, w.rootfs = filepath.Join(dir, "vmlinux"), filepath.Join(dir, "rootfs.ext4")
	for _, p := range []string{w.kernel, w.rootfs} {
		if err := os.WriteFile(p, []byte("placeholder: the fake VMM boots no kernel\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// scalers is the scalers.yaml of the test: one firecracker scaler.
func (w *fcWorld) scalers(t *testing.T, kernel string, maxAgents int, extra string) string {
	fakes := filepath.Join(binDir, "fakes")
	return writeScalers(t, fmt.Sprintf(`
version: 1
firecracker:
  cidr: 10.%d.0.0/24
  bridgeName: %s
  table: %s
scalers:
  - name: vms
    type: firecracker
    maxAgents: %d
    firecrackerPath: %s/firecracker
    jailerPath: %s/jailer
    kernelPath: %s
    uid: 10000
    gid: 10000
    chrootBaseDir: %s
%s    labelSets:
      - labels: [linux, fc]
        rootfsPath: %s
        overlayDriveSizeMib: 16
`, 90+w.n, w.bridge, w.table, maxAgents, fakes, fakes, kernel, w.base, extra, w.rootfs))
}

// start runs the orchestrator in the namespace, listening on every
// address (the guests dial the gateway), on SQLite.
func (w *fcWorld) start(t *testing.T, scalers string, env ...string) *orchestrator {
	t.Helper()
	return w.startWithData(t, t.TempDir(), scalers, env...)
}

// startWithData is start on a data dir the test prepared.
func (w *fcWorld) startWithData(t *testing.T, dataDir, scalers string, env ...string) *orchestrator {
	t.Helper()
	o := &orchestrator{t: t, dataDir: dataDir, token: "admin-" + t.Name(), ns: w.ns, client: w.ns.client}
	port := 4100 + w.n
	o.addr = fmt.Sprintf("127.0.0.1:%d", port)
	o.env = append([]string{
		fmt.Sprintf("KICI_HTTP_ADDR=0.0.0.0:%d", port),
		// The public URL stays on loopback, as on a host whose operator
		// set none: guests dial the gateway and fetch archives relative to
		// the URL they dialled.
		fmt.Sprintf("KICI_PUBLIC_URL=http://127.0.0.1:%d", port),
		"KICI_DATA_DIR=" + o.dataDir,
		"KICI_BOOTSTRAP_ADMIN_TOKEN=" + o.token,
		"KICI_SECRET_KEY=" + testSecretKey,
		"KICI_LOG_FORMAT=text",
		"KICI_LOG_LEVEL=debug",
		"KICI_DISPATCH_ACK_TIMEOUT_MS=3000",
		"KICI_AGENT_RECOVERY_WINDOW_MS=10000",
		"KICI_QUEUE_SWEEP_INTERVAL_MS=200",
		"KICI_SCALER_CONFIG_PATH=" + scalers,
	}, env...)
	o.start()
	return o
}

// leftovers lists what VMs left in the namespace and the chroot base:
// VM dirs, TAPs of the pattern, per-VM rules. Leases are read from the
// store by the caller once the orchestrator stopped.
func (w *fcWorld) leftovers(t *testing.T) []string {
	t.Helper()
	var out []string
	entries, _ := os.ReadDir(filepath.Join(w.base, "firecracker"))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, "VM dir "+e.Name())
		}
	}
	dirs := out
	var err error
	// The link table may change while it is read (other tests add and
	// remove links): the kernel then reports the dump interrupted, and it
	// is read again, as the backend does.
	for attempt := 1; attempt <= 5; attempt++ {
		out = slices.Clone(dirs)
		err = w.ns.do(func() error {
			links, err := netlink.LinkList()
			if err != nil {
				return err
			}
			for _, l := range links {
				if hostnet.IsTapName(l.Attrs().Name) {
					out = append(out, "TAP "+l.Attrs().Name)
				}
			}
			h, err := hostnet.New(w.netConfig())
			if err != nil {
				return err
			}
			addrs, err := h.VMAddrs(context.Background())
			for _, a := range addrs {
				out = append(out, "rules of "+a.String())
			}
			return err
		})
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		t.Fatalf("list the namespace's links and rules: %v", err)
	}
	return out
}

func (w *fcWorld) netConfig() hostnet.Config {
	return hostnet.Config{Bridge: w.bridge, Gateway: netip.MustParseAddr(w.gateway),
		Prefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/24", 90+w.n)), Table: w.table}
}

// leases opens the orchestrator's SQLite store (stopped) and lists the
// VM address leases.
func leases(t *testing.T, o *orchestrator, pool string) []store.VMAddress {
	t.Helper()
	db, err := store.Open(context.Background(), store.Config{DataDir: o.dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var all []store.VMAddress
	rows, err := db.ListVMAddresses(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return append(all, rows...)
}

// stopWithoutLeases stops the orchestrator and checks that its store holds
// no address lease of the test's bridge any more.
func (w *fcWorld) stopWithoutLeases(t *testing.T, o *orchestrator) {
	t.Helper()
	inst := instance(t, o)
	o.stop()
	if l := leases(t, o, inst+"/"+w.bridge); len(l) != 0 {
		t.Errorf("address leases left: %+v", l)
	}
}

// instance is the orchestrator's instance id (the first part of its pool
// name).
func instance(t *testing.T, o *orchestrator) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(o.dataDir, "instance-id"))
	if err != nil {
		t.Fatalf("read instance id: %v", err)
	}
	return strings.TrimSpace(string(b))
}

const fcWorkflow = `
on: {push: {}}
jobs:
  vm:
    runs-on: [linux, fc]
    steps:
      - run: echo "in the guest as $KICI_JOB_NAME"
`

// TestFirecrackerJobRunsInMicroVM: a [linux, fc] job runs on a one-shot
// agent in a microVM, its provisioning timeline is in the job's log, and
// afterwards nothing of the VM is left: no chroot, TAP, rule or lease.
func TestFirecrackerJobRunsInMicroVM(t *testing.T) {
	t.Parallel()
	w := newFCWorld(t)
	o := w.start(t, w.scalers(t, w.kernel, 2, ""))
	o.addRepo(t, map[string]string{"ci.yml": fcWorkflow})
	id := o.push(t)
	r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
	j := job(t, r, "vm")
	if r.Status != "success" || !strings.HasPrefix(j.AgentID, "scaler-firecracker-") {
		t.Fatalf("run %s, job on agent %q (%s): want success on a scaler-firecracker agent", r.Status, j.AgentID, j.Error)
	}
	logs := o.logs(t, id, "vm")
	for _, want := range []string{"[scaler.provisioning]", "[scaler.network]", "[scaler.ready]", "[agent.connecting]", "in the guest as vm"} {
		if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("job logs lack %q: %q", want, logs)
		}
	}
	waitFor(t, 20*time.Second, "the VM's host resources to be gone", func() bool { return len(w.leftovers(t)) == 0 })
	w.stopWithoutLeases(t, o)
}

// TestFirecrackerReapsPlantedLeftoversAtStart: what a crashed
// orchestrator could leave (a VM dir, a TAP of the pattern, a VM's
// nftables rules, an address lease) is reaped when the orchestrator starts,
// while a TAP outside the pattern on the same bridge is left alone.
func TestFirecrackerReapsPlantedLeftoversAtStart(t *testing.T) {
	t.Parallel()
	w := newFCWorld(t)
	const dead = "scaler-firecracker-deadbeef"
	const keep = "kici-keepme"
	dataDir := t.TempDir()
	inst := "kici-00000000feedface"
	if err := os.WriteFile(filepath.Join(dataDir, "instance-id"), []byte(inst+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The lease, in the store the orchestrator will open.
	db, err := store.Open(context.Background(), store.Config{DataDir: dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := w.netConfig()
	lease, err := db.AllocateVMAddress(context.Background(), store.VMAddress{Pool: inst + "/" + w.bridge, Scaler: "vms", VMID: dead, TAP: "kici-deadbeef"},
		store.AddressRange{First: cfg.Gateway.Next(), Last: cfg.Gateway.Next(), Skip: nil}, func(netip.Addr) string { return "06:00:AC:00:00:02" })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The VM dir, with a jail and no VMM behind its pid file.
	if err := os.MkdirAll(filepath.Join(w.base, "firecracker", dead, "root"), 0o750); err != nil {
		t.Fatal(err)
	}
	// The bridge with its TAP of the pattern, one outside it, and the
	// VM's rules.
	err = w.ns.do(func() error {
		h, err := hostnet.New(cfg)
		if err != nil {
			return err
		}
		ctx := context.Background()
		if err := h.EnsureBridge(ctx); err != nil {
			return err
		}
		if err := h.EnsureFirewall(ctx); err != nil {
			return err
		}
		if err := h.CreateTap(ctx, hostnet.TapName(dead), 10000, 10000); err != nil {
			return err
		}
		mac, err := net.ParseMAC(lease.MAC)
		if err != nil {
			return err
		}
		if err := h.AllowVM(ctx, hostnet.VMRules{Addr: lease.Address, Tap: lease.TAP, MAC: mac}); err != nil {
			return err
		}
		br, err := netlink.LinkByName(w.bridge)
		if err != nil {
			return err
		}
		other := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: keep, MasterIndex: br.Attrs().Index}, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_DEFAULTS}
		return netlink.LinkAdd(other)
	})
	if err != nil {
		t.Fatalf("plant leftovers: %v", err)
	}
	if got := w.leftovers(t); len(got) != 3 {
		t.Fatalf("planted leftovers: got %q, want a VM dir, a TAP and rules", got)
	}
	o := w.startWithData(t, dataDir, w.scalers(t, w.kernel, 2, ""))
	waitFor(t, 30*time.Second, "the leftovers to be reaped", func() bool { return len(w.leftovers(t)) == 0 })
	err = w.ns.do(func() error {
		_, err := netlink.LinkByName(keep)
		return err
	})
	if err != nil {
		t.Errorf("TAP %s outside the pattern: %v, want it untouched", keep, err)
	}
	o.stop()
	if l := leases(t, o, inst+"/"+w.bridge); len(l) != 0 {
		t.Errorf("address leases left: %+v", l)
	}
}

// TestFirecrackerMissingKernelFailsTheJob: a kernel that is not there
// refuses every spawn, naming it; after failJobsAfter refusals in a row
// the job fails with that cause instead of waiting out the queue timeout.
func TestFirecrackerMissingKernelFailsTheJob(t *testing.T) {
	t.Parallel()
	w := newFCWorld(t)
	o := w.start(t, w.scalers(t, "/nonexistent/vmlinux", 2, "    failJobsAfter: 2\n"),
		"KICI_SCALER_DEFER_BASE_MS=200", "KICI_SCALER_DEFER_MAX_MS=400")
	o.addRepo(t, map[string]string{"ci.yml": fcWorkflow})
	id := o.push(t)
	r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
	j := job(t, r, "vm")
	if r.Status != "failure" || j.Status != "failure" {
		t.Fatalf("run %s, job %s: want both failed", r.Status, j.Status)
	}
	for _, want := range []string{"failed 2 times in a row", "/nonexistent/vmlinux", "kici-admin scaler retry vms"} {
		if !strings.Contains(j.Error, want) {
			t.Errorf("job error %q lacks %q", j.Error, want)
		}
	}
	if got := w.leftovers(t); len(got) != 0 {
		t.Errorf("refused spawns left %q", got)
	}
}

// TestFirecrackerOrchestratorKilledMidJob: SIGKILL of the orchestrator
// while a job runs in a VM; the restarted orchestrator adopts the VM (its
// agent reconnects) and the job finishes, and nothing is left after.
func TestFirecrackerOrchestratorKilledMidJob(t *testing.T) {
	t.Parallel()
	w := newFCWorld(t)
	o := w.start(t, w.scalers(t, w.kernel, 2, ""))
	o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  vm:
    runs-on: [linux, fc]
    steps:
      - run: echo started; sleep 3; echo finished
`})
	id := o.push(t)
	o.waitRun(t, id, 30*time.Second, "the job to run in its VM", func(r apiv1.Run) bool {
		return len(r.Jobs) == 1 && r.Jobs[0].Status == "running"
	})
	// While it runs, the VM is listed as live compute, tracked by the
	// backend, its registration and its job.
	var ol struct {
		Compute []struct {
			ID        string   `json:"id"`
			Backend   string   `json:"backend"`
			Status    string   `json:"status"`
			TrackedBy []string `json:"tracked_by"`
		} `json:"compute"`
	}
	o.api(t, "GET", "/api/v1/scalers/orphans", nil, &ol, http.StatusOK)
	if len(ol.Compute) != 1 || ol.Compute[0].Backend != "firecracker" || ol.Compute[0].Status != "tracked" ||
		!slices.Equal(ol.Compute[0].TrackedBy, []string{"backend", "registered", "bound-job"}) {
		t.Errorf("orphans while the job runs: %+v, want the VM tracked by backend, registered and bound-job", ol.Compute)
	}
	o.kill()
	if got := w.leftovers(t); len(got) < 2 {
		t.Fatalf("with the orchestrator gone the VM should still run: host has %q", got)
	}
	o.start()
	r := o.waitRun(t, id, 60*time.Second, "run to end after the restart", ended)
	if r.Status != "success" {
		t.Errorf("run %s (%s): want success, the VM adopted", r.Status, job(t, r, "vm").Error)
	}
	waitFor(t, 30*time.Second, "the VM's host resources to be gone", func() bool { return len(w.leftovers(t)) == 0 })
}

// TestFirecrackerHundredJobsThroughFourVMs: 100 jobs through a scaler of
// at most 4 VMs all succeed, each on a VM of its own, and nothing of any
// VM is left afterwards (docs/benchmarks.md reports the time it took).
func TestFirecrackerHundredJobsThroughFourVMs(t *testing.T) {
	t.Parallel()
	w := newFCWorld(t)
	o := w.start(t, w.scalers(t, w.kernel, 4, ""), "KICI_LOG_LEVEL=info")
	var wf strings.Builder
	wf.WriteString("on: {push: {}}\njobs:\n")
	const jobs = 100
	for i := range jobs {
		fmt.Fprintf(&wf, "  j%03d:\n    runs-on: [linux, fc]\n    steps: [{run: echo job %d}]\n", i, i)
	}
	o.addRepo(t, map[string]string{"ci.yml": wf.String()})
	start := time.Now()
	id := o.push(t)
	r := o.waitRun(t, id, 180*time.Second, "100 jobs to end", ended)
	took := time.Since(start)
	agents := map[string]bool{}
	for _, j := range r.Jobs {
		if j.Status != "success" {
			t.Errorf("job %s: %s (%s)", j.Name, j.Status, j.Error)
		}
		agents[j.AgentID] = true
	}
	if len(r.Jobs) != jobs || len(agents) != jobs {
		t.Errorf("%d jobs on %d agents, want %d jobs each on its own VM", len(r.Jobs), len(agents), jobs)
	}
	t.Logf("%d jobs through 4 VMs in %s (%.1f jobs/s)", jobs, took.Round(time.Millisecond), float64(jobs)/took.Seconds())
	waitFor(t, 30*time.Second, "every VM's host resources to be gone", func() bool { return len(w.leftovers(t)) == 0 })
	w.stopWithoutLeases(t, o)
}

// TestFirecrackerWarmPool: a warm pool keeps a booted microVM idle, and a
// job then runs on it at once, without waiting for a spawn.
func TestFirecrackerWarmPool(t *testing.T) {
	t.Parallel()
	w := newFCWorld(t)
	cfg := w.scalers(t, w.kernel, 2, "    warmPool: {enabled: true, size: 1}\n")
	// A warm pool needs the label set's resources (its agents' shape).
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "        overlayDriveSizeMib: 16\n", "        overlayDriveSizeMib: 16\n        resources: {cpus: 1, memory: 512m}\n", 1)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := w.start(t, cfg)
	var warm string
	waitFor(t, 30*time.Second, "a warm microVM's agent to register", func() bool {
		var list apiv1.AgentList
		o.api(t, "GET", "/api/v1/agents", nil, &list, http.StatusOK)
		for _, a := range list.Agents {
			if strings.HasPrefix(a.ID, "scaler-firecracker-") && len(a.BusyJobs) == 0 {
				warm = a.ID
				return true
			}
		}
		return false
	})
	o.addRepo(t, map[string]string{"ci.yml": fcWorkflow})
	id := o.push(t)
	r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
	if j := job(t, r, "vm"); r.Status != "success" || j.AgentID != warm {
		t.Fatalf("run %s on agent %q: want success on the warm agent %s", r.Status, j.AgentID, warm)
	}
}

// TestFirecrackerWarmStart: a warmStart label set's snapshot is built at
// start; jobs then run on VMs restored from it (their agents reach the
// orchestrator once they moved to their own addresses) and leave nothing
// but the snapshot behind.
func TestFirecrackerWarmStart(t *testing.T) {
	t.Parallel()
	w := newFCWorld(t)
	cfg := w.scalers(t, w.kernel, 2, "")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "        overlayDriveSizeMib: 16\n", "        overlayDriveSizeMib: 16\n        warmStart: true\n", 1)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := w.start(t, cfg)
	waitFor(t, 60*time.Second, "the warm-start snapshot to be built", func() bool {
		m, _ := filepath.Glob(filepath.Join(w.base, "firecracker", ".snapshots", "*", "warm.json"))
		return len(m) == 1
	})
	o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  a:
    runs-on: [linux, fc]
    steps: [{run: echo "restored a"}]
  b:
    runs-on: [linux, fc]
    steps: [{run: echo "restored b"}]
`})
	id := o.push(t)
	r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
	if r.Status != "success" {
		t.Fatalf("run %s: %+v", r.Status, r.Jobs)
	}
	for _, name := range []string{"a", "b"} {
		logs := o.logs(t, id, name)
		for _, want := range []string{"restored from snapshot", "restored " + name} {
			if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, want) }) {
				t.Errorf("job %s logs lack %q: %q", name, want, logs)
			}
		}
	}
	waitFor(t, 20*time.Second, "the VMs' host resources to be gone", func() bool { return len(w.leftovers(t)) == 0 })
	w.stopWithoutLeases(t, o)
}
