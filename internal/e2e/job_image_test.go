package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/agent/runner"
)

// stepImages are two images built FROM scratch with Debian's
// busybox-static for a test, tagged uniquely and removed when it ends:
// step has busybox and its applets (no bash); service runs an HTTP server
// on :8080 that answers $ANSWER, with a HEALTHCHECK that passes once it is
// up.
type stepImages struct{ step, service string }

// randomID returns n random bytes in hex.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func buildStepImages(t *testing.T) stepImages {
	t.Helper()
	requireDocker(t)
	tag := randomID(6)
	im := stepImages{step: "kici-e2e-step:" + tag, service: "kici-e2e-service:" + tag}
	dir := t.TempDir()
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("read /bin/busybox (install busybox-static): %v", err)
	}
	list, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "busybox"), busybox, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" {
			if err := os.Symlink("busybox", filepath.Join(bin, applet)); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := map[string]string{
		"start.sh": "#!/bin/sh\necho \"service $(hostname) up\"\nmkdir -p /www /tmp\necho \"$ANSWER\" > /www/index.html\n" +
			"touch /tmp/up\nexec httpd -f -v -p 8080 -h /www\n",
		"Dockerfile.step": "FROM scratch\nCOPY bin /bin\nENV PATH=/bin\n",
		"Dockerfile.service": "FROM " + im.step + "\nCOPY start.sh /start.sh\nCMD [\"/start.sh\"]\n" +
			"HEALTHCHECK --interval=300ms --timeout=2s --retries=100 CMD [\"test\", \"-f\", \"/tmp/up\"]\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, img := range []struct{ file, tag string }{{"Dockerfile.step", im.step}, {"Dockerfile.service", im.service}} {
		t.Cleanup(func() { _, _ = docker(t, "rmi", "-f", img.tag) })
		if out, err := docker(t, "build", "-q", "-f", filepath.Join(dir, img.file), "-t", img.tag, dir); err != nil {
			t.Fatalf("docker build %s: %v: %s", img.tag, err, out)
		}
	}
	return im
}

// TestJobImageWithService: a job with image: and a service runs on a real
// agent; its step reaches the service by name, the job's log shows the
// service's answer and the service's own log, and nothing of the job is
// left on the engine.
func TestJobImageWithService(t *testing.T) {
	t.Parallel()
	im := buildStepImages(t)
	o := startOrchestrator(t, "")
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  boxed:
    image: {image: %s, pull: never}
    services:
      api: {image: %s, pull: if-not-present, env: {ANSWER: answer-from-the-api-service}}
    steps:
      - run: |
          echo "api is $KICI_SERVICE_API_HOST"
          wget -q -O- http://api:8080/
`, im.step, im.service)})
	startAgent(t, o, "", "image-agent-"+randomID(4), nil)
	id := o.push(t)
	r := o.waitRun(t, id, 90*time.Second, "the run to end", ended)
	logs := o.logs(t, id, "boxed")
	if r.Status != "success" {
		t.Fatalf("run %s (%s): want success; logs:\n%s", r.Status, job(t, r, "boxed").Error, strings.Join(logs, "\n"))
	}
	for _, want := range []string{"api is api", "answer-from-the-api-service", "[service api] service api up"} {
		if !slices.Contains(logs, want) {
			t.Errorf("logs have no line %q:\n%s", want, strings.Join(logs, "\n"))
		}
	}
	label := "label=" + runner.LabelJobID + "=" + job(t, r, "boxed").ID
	if out, _ := docker(t, "ps", "-aq", "--filter", label); out != "" {
		t.Errorf("containers of the job left: %s", out)
	}
	if out, _ := docker(t, "network", "ls", "-q", "--filter", label); out != "" {
		t.Errorf("networks of the job left: %s", out)
	}
}

// TestJobImageLeftoversRemovedOnRestart: an agent killed with SIGKILL in
// the middle of a job with a service leaves its containers and network;
// the same agent started again removes them before it takes a job.
func TestJobImageLeftoversRemovedOnRestart(t *testing.T) {
	t.Parallel()
	im := buildStepImages(t)
	o := startOrchestrator(t, "")
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  long:
    image: {image: %s, pull: never}
    services:
      api: {image: %s, pull: never}
    steps:
      - run: echo started; sleep 300
`, im.step, im.service)})
	agentID := "image-crash-" + randomID(4)
	owner := "label=" + runner.LabelJobOwner + "=" + agentID
	t.Cleanup(func() { // whatever the test left
		if ids, _ := docker(t, "ps", "-aq", "--filter", owner); ids != "" {
			_, _ = docker(t, append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
		}
		if ids, _ := docker(t, "network", "ls", "-q", "--filter", owner); ids != "" {
			_, _ = docker(t, append([]string{"network", "rm"}, strings.Fields(ids)...)...)
		}
	})
	workDir := t.TempDir()
	a := startAgent(t, o, "", agentID, nil, "KICI_AGENT_WORKDIR="+workDir)
	id := o.push(t)
	o.waitRun(t, id, 60*time.Second, "the step to start", func(r apiv1Run) bool {
		return slices.Contains(o.logs(t, id, "long"), "started")
	})
	before, _ := docker(t, "ps", "-aq", "--filter", owner)
	if len(strings.Fields(before)) != 2 {
		t.Fatalf("containers of the agent's job: got %q, want the service's and the step's", before)
	}
	a.kill()
	if after, _ := docker(t, "ps", "-aq", "--filter", owner); after != before {
		t.Fatalf("containers after SIGKILL: got %q, want %q still there", after, before)
	}
	startAgent(t, o, "", agentID, nil, "KICI_AGENT_WORKDIR="+workDir)
	// The restarted agent may be given the job again; only the containers
	// of the killed run must go.
	waitFor(t, 30*time.Second, "the killed agent's containers to be removed", func() bool {
		for _, c := range strings.Fields(before) {
			if out, _ := docker(t, "ps", "-aq", "--filter", "id="+c); out != "" {
				return false
			}
		}
		return true
	})
}
