package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// forkBaseWorkflow is the workflow of main: build prints the secret it
// declares (masked) and the fork's file, if the code is the fork's.
const forkBaseWorkflow = `
on:
  push: {branches: [main]}
  pull_request: {}
jobs:
  build:
    runs-on: [linux]
    secrets: [DEPLOY_TOKEN]
    steps:
      - run: echo "token=[$DEPLOY_TOKEN] fork=[$KICI_EVENT_FORK] number=[$KICI_EVENT_NUMBER]"
      - run: cat fork.txt 2>/dev/null || echo "base code"
`

// forkHeadWorkflow is what the fork's commit makes of it: print the
// secret reversed, which masking cannot catch.
const forkHeadWorkflow = `
on:
  pull_request: {}
jobs:
  steal:
    runs-on: [linux]
    secrets: [DEPLOY_TOKEN]
    steps:
      - run: echo "stolen=$(printf '%s' "$DEPLOY_TOKEN" | rev)"
`

// gitIn runs git in dir and returns its trimmed output.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(minimalEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// forkRepo makes a repository with forkBaseWorkflow on main and, under
// refs/pull/7/head (where GitHub keeps a fork's pull request in the base
// repository), a commit that rewrites the workflow and adds fork.txt.
func forkRepo(t *testing.T) (dir, baseSHA, headSHA string) {
	t.Helper()
	dir = t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".kici/workflows/ci.yml", forkBaseWorkflow)
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "base")
	baseSHA = gitIn(t, dir, "rev-parse", "HEAD")
	gitIn(t, dir, "checkout", "-q", "-b", "patch-1")
	write(".kici/workflows/ci.yml", forkHeadWorkflow)
	write("fork.txt", "fork code here\n")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "steal")
	headSHA = gitIn(t, dir, "rev-parse", "HEAD")
	gitIn(t, dir, "update-ref", "refs/pull/7/head", headSHA)
	gitIn(t, dir, "checkout", "-q", "main")
	gitIn(t, dir, "branch", "-q", "-D", "patch-1")
	return dir, baseSHA, headSHA
}

// deliverForkPR posts a signed GitHub pull_request delivery of number 7
// from fork mallory/hello to source, and returns the runs it started.
func (o *orchestrator) deliverForkPR(t *testing.T, source, secret, id, baseSHA, headSHA string) []apiv1.RunRef {
	t.Helper()
	body := fmt.Appendf(nil, `{"action": "opened", "number": 7,
  "pull_request": {"number": 7,
    "head": {"ref": "patch-1", "sha": %q, "repo": {"full_name": "mallory/hello"}},
    "base": {"ref": "main", "sha": %q, "repo": {"full_name": "octo-org/hello"}}},
  "repository": {"full_name": "octo-org/hello"}, "sender": {"login": "mallory"}}`, headSHA, baseSHA)
	return o.postGitHub(t, source, secret, "pull_request", id, body).Runs
}

// reversed returns s backwards.
func reversed(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// TestForkPullRequestSecrets runs a fork's pull request, whose head commit
// rewrites the workflow to print the secret reversed, on a real
// orchestrator and agent: under "approve" nothing runs until the approval
// (a push run started after it goes through the same agent first), then
// the base workflow runs on the fork's code with the secret masked; under
// "run" it runs at once and the secret reads empty.
func TestForkPullRequestSecrets(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		secret := randomValue("f0rk-")
		o.api(t, "PUT", "/api/v1/secrets/DEPLOY_TOKEN", apiv1.SecretRequest{Value: secret}, nil, http.StatusCreated)
		dir, baseSHA, headSHA := forkRepo(t)
		const hook = "fork-hook-secret"
		for name, policy := range map[string]string{"fork-approve": "", "fork-run": "run"} {
			o.api(t, "POST", "/api/v1/sources", apiv1.Source{Name: name, Kind: "local", Path: dir, WebhookSecret: hook, ForkPullRequests: policy}, nil, http.StatusCreated)
		}
		startAgent(t, o, "", "fork-agent", []string{"linux"})

		runs := o.deliverForkPR(t, "fork-approve", hook, "e2e-fork-1", baseSHA, headSHA)
		if len(runs) != 1 {
			t.Fatalf("fork pull request started %d runs, want 1", len(runs))
		}
		held := runs[0].ID
		// A push on the same source, after the fork's run: once it has
		// ended, the agent was free while the fork's run waited.
		var tr apiv1.TriggerResponse
		o.api(t, "POST", "/api/v1/sources/fork-approve/trigger", apiv1.TriggerRequest{Event: "push", Ref: "main"}, &tr, http.StatusOK)
		if len(tr.Runs) != 1 {
			t.Fatalf("push started %d runs, want 1", len(tr.Runs))
		}
		if r := o.waitRun(t, tr.Runs[0].ID, 60*time.Second, "push run to end", ended); r.Status != "success" {
			t.Fatalf("push run: got %s, want success", r.Status)
		}
		r := o.run(t, held)
		if r.Status != apiv1.RunAwaitingApproval || len(r.Jobs) != 1 || r.Jobs[0].Name != "build" || r.Jobs[0].Status != "waiting" {
			t.Fatalf("fork's run before approval: got %s with %+v, want awaiting_approval with the base's build waiting", r.Status, r.Jobs)
		}

		o.api(t, "POST", "/api/v1/runs/"+held+"/approve", nil, nil, http.StatusOK)
		r = o.waitRun(t, held, 60*time.Second, "approved run to end", ended)
		if r.Status != "success" {
			t.Fatalf("approved run: got %s (%+v), want success", r.Status, r.Jobs)
		}
		logs := strings.Join(o.logs(t, held, "build"), "\n")
		for _, want := range []string{"token=[***] fork=[true] number=[7]", "fork code here", "approved by"} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs of the approved run: want %q in\n%s", want, logs)
			}
		}

		runs = o.deliverForkPR(t, "fork-run", hook, "e2e-fork-2", baseSHA, headSHA)
		if len(runs) != 1 {
			t.Fatalf("fork pull request under run started %d runs, want 1", len(runs))
		}
		r = o.waitRun(t, runs[0].ID, 60*time.Second, "run without secrets to end", ended)
		if r.Status != "success" || r.Jobs[0].Name != "build" {
			t.Fatalf("run without secrets: got %s (%+v), want success of the base's build", r.Status, r.Jobs)
		}
		withheld := strings.Join(o.logs(t, runs[0].ID, "build"), "\n")
		for _, want := range []string{"token=[] fork=[true]", "fork code here", "secrets withheld"} {
			if !strings.Contains(withheld, want) {
				t.Errorf("logs of the run without secrets: want %q in\n%s", want, withheld)
			}
		}
		for _, text := range []string{logs, withheld} {
			if strings.Contains(text, reversed(secret)) || strings.Contains(text, secret) || strings.Contains(text, "stolen=") {
				t.Errorf("a fork's run shows the secret or ran the fork's workflow:\n%s", text)
			}
		}
	})
}
