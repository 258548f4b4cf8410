package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/testsvc"
)

// docker runs the docker CLI and returns its trimmed output.
func docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// requireDocker skips (or fails, when services are required) without a
// reachable Docker engine.
func requireDocker(t *testing.T) {
	t.Helper()
	if out, err := docker(t, "info", "--format", "{{.ServerVersion}}"); err != nil {
		if testsvc.RequireServices() {
			t.Fatalf("no Docker engine is reachable and %s=1 requires one: %v: %s", testsvc.EnvRequireServices, err, out)
		}
		t.Skipf("no Docker engine is reachable: %v (set %s=1 to fail instead)", err, testsvc.EnvRequireServices)
	}
}

var (
	imageOnce sync.Once
	imageName string
	imageErr  error
)

// agentImage builds, once, an image FROM scratch holding the static
// kici-agent and busybox (for the steps' shell); no registry is involved.
func agentImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kici-e2e-image-")
		if err != nil {
			imageErr = err
			return
		}
		defer os.RemoveAll(dir)
		for src, dst := range map[string]string{agentBin(): "kici-agent", "/bin/busybox": "busybox"} {
			data, err := os.ReadFile(src)
			if err != nil {
				imageErr = fmt.Errorf("read %s (install busybox-static): %w", src, err)
				return
			}
			if err := os.WriteFile(filepath.Join(dir, dst), data, 0o755); err != nil {
				imageErr = err
				return
			}
		}
		dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nCOPY busybox /bin/sh\nCOPY kici-agent /kici-agent\n" +
			"ENV PATH=/bin\nENTRYPOINT [\"/kici-agent\"]\n"
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			imageErr = err
			return
		}
		imageName = fmt.Sprintf("kici-e2e-agent:%d", time.Now().UnixNano())
		if out, err := exec.Command("docker", "build", "-q", "-t", imageName, dir).CombinedOutput(); err != nil {
			imageErr = fmt.Errorf("docker build: %v: %s", err, out)
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageName
}

// bridgeGateway is the host's address on docker0, which containers reach
// as host.docker.internal (host-gateway): the orchestrator listens there,
// so it is reachable from this host and its containers only.
func bridgeGateway(t *testing.T) string {
	t.Helper()
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Fatalf("docker0: %v", err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatal("docker0 has no IPv4 address")
	return ""
}

// containerScalerOrchestrator starts an orchestrator on the docker0
// address with one container scaler.
func containerScalerOrchestrator(t *testing.T, maxAgents int, env ...string) *orchestrator {
	t.Helper()
	requireDocker(t)
	image := agentImage(t)
	gw := bridgeGateway(t)
	ln, err := net.Listen("tcp", gw+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cfg := writeScalers(t, fmt.Sprintf(`
version: 1
scalers:
  - name: boxes
    type: container
    maxAgents: %d
    orchestratorUrl: ws://host.docker.internal:%s/ws
    extraHosts: ["host.docker.internal:host-gateway"]
    labelSets:
      - labels: [linux, container]
        image: %s
        imagePullPolicy: Never
`, maxAgents, port, image))
	return startOrchestratorAt(t, addr, "", append([]string{"KICI_SCALER_CONFIG_PATH=" + cfg}, env...)...)
}

// containersOf lists the ids of containers with a label, running or not.
func containersOf(t *testing.T, label string) []string {
	t.Helper()
	out, err := docker(t, "ps", "-aq", "--filter", "label="+label)
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	return strings.Fields(out)
}

// TestContainerScalerRunsJobInContainer: a [linux, container] job runs in
// a container the scaler starts, and the container is gone afterwards.
func TestContainerScalerRunsJobInContainer(t *testing.T) {
	t.Parallel()
	o := containerScalerOrchestrator(t, 2)
	o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  boxed:
    runs-on: [linux, container]
    steps: [{run: "echo inside $(cat /proc/1/cgroup | head -c 0)container; ls /kici-agent"}]
`})
	id := o.push(t)
	r := o.waitRun(t, id, 90*time.Second, "run to end", ended)
	j := job(t, r, "boxed")
	if r.Status != "success" || !strings.HasPrefix(j.AgentID, "scaler-container-") {
		t.Fatalf("run %s, job on %q (%s): want success on a scaler-container agent; logs %q", r.Status, j.AgentID, j.Error, o.logs(t, id, "boxed"))
	}
	if got := o.logs(t, id, "boxed"); !strings.Contains(strings.Join(got, "\n"), "/kici-agent") {
		t.Errorf("the step did not run inside the image: logs %q", got)
	}
	waitFor(t, 30*time.Second, "the agent's container to be removed", func() bool {
		return len(containersOf(t, "kici-agent-id="+j.AgentID)) == 0
	})
}

// TestRestartAdoptsOrReapsOwnContainersOnly: the orchestrator dies with
// SIGKILL while three containers run jobs; after a restart each of its
// containers is adopted (tracked again, its agent reconnected) or gone
// within 30 s, and a container labelled with another orchestrator
// instance's id is untouched.
func TestRestartAdoptsOrReapsOwnContainersOnly(t *testing.T) {
	t.Parallel()
	o := containerScalerOrchestrator(t, 3)
	o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {}}
jobs:
  wait:
    runs-on: [linux, container]
    matrix: {n: ["1", "2", "3"]}
    steps: [{run: "sleep 120"}]
`})
	foreign, err := docker(t, "run", "-d", "--entrypoint", "/bin/busybox",
		"--label", "kici-managed=true", "--label", "kici-instance=someone-else", "--label", "kici-scaler-name=boxes",
		"--label", "kici-agent-id=scaler-container-foreign", agentImage(t), "sleep", "300")
	if err != nil {
		t.Fatalf("start the foreign container: %v: %s", err, foreign)
	}
	t.Cleanup(func() { _, _ = docker(t, "rm", "-f", foreign) })
	id := o.push(t)
	o.waitRun(t, id, 90*time.Second, "three jobs running", func(r apiv1Run) bool {
		running := 0
		for _, j := range r.Jobs {
			if j.Status == "running" {
				running++
			}
		}
		return running == 3
	})
	instance, err := os.ReadFile(filepath.Join(o.dataDir, "instance-id"))
	if err != nil {
		t.Fatal(err)
	}
	own := "kici-instance=" + strings.TrimSpace(string(instance))
	if n := len(containersOf(t, own)); n != 3 {
		t.Fatalf("%d containers of this instance before the crash, want 3", n)
	}
	o.kill()
	o.start()
	restarted := time.Now()
	waitFor(t, 30*time.Second, "each container of this instance to be adopted or reaped", func() bool {
		var orphans struct {
			Compute []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"compute"`
		}
		o.api(t, "GET", "/api/v1/scalers/orphans", nil, &orphans, http.StatusOK)
		out, err := docker(t, "ps", "-q", "--filter", "label="+own)
		if err != nil {
			t.Fatalf("docker ps: %v: %s", err, out)
		}
		live := len(strings.Fields(out))
		tracked := 0
		for _, c := range orphans.Compute {
			if c.Status == "tracked" {
				tracked++
			}
		}
		return tracked == live
	})
	t.Logf("containers adopted or reaped %s after the restart", time.Since(restarted).Round(time.Millisecond))
	state, err := docker(t, "inspect", "-f", "{{.State.Running}}", foreign)
	if err != nil || state != "true" {
		t.Errorf("the other instance's container: running=%q (%v), want it untouched and running", state, err)
	}
	// The adopted agents still hold their jobs: cancelling the run reaches
	// them, and their containers go.
	o.api(t, "POST", "/api/v1/runs/"+id+"/cancel", map[string]bool{"force": true}, nil, http.StatusOK)
	r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
	if r.Status != "cancelled" && r.Status != "failure" {
		t.Errorf("run after the restart: got %s, want cancelled (or failure for a reaped agent)", r.Status)
	}
	waitFor(t, 30*time.Second, "this instance's containers to be gone", func() bool { return len(containersOf(t, own)) == 0 })
}
