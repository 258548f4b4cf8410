package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
)

// forkBaseWorkflow is the workflow on main, the base of the pull requests:
// build declares a secret; the other jobs show what event.fork and
// event.number are in if:.
const forkBaseWorkflow = `name: ci
on:
  push: {branches: [main]}
  pull_request: {}
jobs:
  build:
    runs-on: [linux]
    secrets: [DEPLOY_TOKEN]
    steps:
      - name: base step
        run: echo "base build"
  only-fork:
    runs-on: [linux]
    if: event.fork
    steps:
      - run: echo fork
  not-fork:
    runs-on: [linux]
    if: "!event.fork"
    steps:
      - run: echo same repository
  pr-seven:
    runs-on: [linux]
    if: event.number == 7
    steps:
      - run: echo seven
`

// forkHeadWorkflow is what the fork's head commit changes the workflow
// to: one job that prints the secret reversed, past masking.
const forkHeadWorkflow = `name: ci
on:
  pull_request: {}
jobs:
  steal:
    runs-on: [linux]
    secrets: [DEPLOY_TOKEN]
    steps:
      - name: exfiltrate
        run: echo "$DEPLOY_TOKEN" | rev
`

// forkRepo makes a repository whose main holds forkBaseWorkflow and whose
// refs/pull/7/head (as GitHub keeps a fork's pull request in the base
// repository) is a commit on top that replaces it with forkHeadWorkflow.
func forkRepo(t *testing.T) (dir, baseSHA, headSHA string) {
	t.Helper()
	dir, baseSHA = gitRepo(t, map[string]string{".kici/workflows/ci.yml": forkBaseWorkflow, "README.md": "hello\n"})
	git(t, dir, "checkout", "-q", "-b", "patch-1")
	writeFile(t, dir, ".kici/workflows/ci.yml", forkHeadWorkflow)
	writeFile(t, dir, "evil.sh", "echo pwned\n")
	git(t, dir, "add", "-A")
	git(t, dir, "-c", "user.name=mallory", "-c", "user.email=m@kici.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "steal")
	headSHA = strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))
	git(t, dir, "update-ref", "refs/pull/7/head", headSHA)
	git(t, dir, "checkout", "-q", "main")
	git(t, dir, "branch", "-q", "-D", "patch-1")
	return dir, baseSHA, headSHA
}

// pullRequest returns a GitHub pull_request delivery of number 7 from
// headRepo into octo-org/hello's main.
func pullRequest(headRepo, baseSHA, headSHA string) []byte {
	return fmt.Appendf(nil, `{
  "action": "opened", "number": 7,
  "pull_request": {
    "number": 7,
    "head": {"ref": "patch-1", "sha": %q, "repo": {"full_name": %q}},
    "base": {"ref": "main", "sha": %q, "repo": {"full_name": "octo-org/hello"}}
  },
  "repository": {"full_name": "octo-org/hello"},
  "sender": {"login": "mallory"}
}`, headSHA, headRepo, baseSHA)
}

// addForkSource registers a local source over dir with webhookSecret and
// the given fork policy ("" for the default).
func (h *harness) addForkSource(t *testing.T, name, dir, policy string) apiv1.Source {
	t.Helper()
	var out apiv1.Source
	h.mustAdmin(t, http.MethodPost, "/api/v1/sources", apiv1.Source{Name: name, Kind: "local", Path: dir, WebhookSecret: webhookSecret, ForkPullRequests: policy}, http.StatusCreated, &out)
	return out
}

// deliverPR posts a signed pull_request delivery to source and returns
// the answer.
func (h *harness) deliverPR(t *testing.T, source, id string, body []byte) response {
	t.Helper()
	return h.deliver(t, delivery{route: "github", source: source, event: "pull_request", id: id, signature: sign(webhookSecret, body), body: body})
}

// forkRunID delivers a fork's pull request to source and returns the one
// run it created.
func (h *harness) forkRunID(t *testing.T, source, id, baseSHA, headSHA string) string {
	t.Helper()
	resp := h.deliverPR(t, source, id, pullRequest("mallory/hello", baseSHA, headSHA))
	var tr apiv1.TriggerResponse
	resp.decode(t, &tr)
	if resp.status != http.StatusOK || len(tr.Runs) != 1 {
		t.Fatalf("fork pull request: got status %d, %d runs (%s), want 200 and 1 run", resp.status, len(tr.Runs), resp.body)
	}
	return tr.Runs[0].ID
}

// jobNames lists a run's job names, sorted.
func jobNames(run apiv1.Run) []string {
	var out []string
	for _, j := range run.Jobs {
		out = append(out, j.Name)
	}
	slices.Sort(out)
	return out
}

// queuedJobs returns the names of the queued jobs of run runID, sorted.
func (h *harness) queuedJobs(t *testing.T, runID string) []string {
	t.Helper()
	var q apiv1.Queue
	h.mustAdmin(t, http.MethodGet, "/api/v1/queue", nil, http.StatusOK, &q)
	var out []string
	for _, e := range q.Jobs {
		if e.RunID == runID {
			out = append(out, e.Job)
		}
	}
	slices.Sort(out)
	return out
}

// timeline reads a job's provisioning section (its job events) as text.
func (h *harness) timeline(t *testing.T, runID, job string) string {
	t.Helper()
	var page apiv1.LogPage
	h.mustAdmin(t, http.MethodGet, fmt.Sprintf("/api/v1/runs/%s/jobs/%s/logs?step=%d", runID, job, apiv1.ProvisioningStep), nil, http.StatusOK, &page)
	var lines []string
	for _, l := range page.Lines {
		lines = append(lines, l.Text)
	}
	return strings.Join(lines, "\n")
}

// TestForkPullRequestPolicies sends signed pull_request deliveries from a
// fork whose head commit rewrites the workflow to print a secret, under
// each fork policy, and one from the same repository.
func TestForkPullRequestPolicies(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, baseSHA, headSHA := forkRepo(t)
		baseJobs := []string{"build", "not-fork", "only-fork", "pr-seven"}

		t.Run("approve holds the base workflow's run until approved", func(t *testing.T) {
			src := h.addForkSource(t, "fork-approve", dir, "")
			if src.ForkPullRequests != "approve" {
				t.Errorf("source added without a policy: got fork_pull_requests %q, want approve", src.ForkPullRequests)
			}
			id := h.forkRunID(t, "fork-approve", "fa-1", baseSHA, headSHA)
			run := h.getRun(t, id)
			if diff := cmp.Diff(baseJobs, jobNames(run)); diff != "" {
				t.Errorf("jobs of the fork's run: want the base commit's workflow (-want +got):\n%s", diff)
			}
			if run.SHA != headSHA {
				t.Errorf("got run sha %s, want the fork's head %s (its code is built)", run.SHA, headSHA)
			}
			if run.Status != apiv1.RunAwaitingApproval || !strings.Contains(run.Error, "awaiting approval") {
				t.Errorf("got status %q error %q, want awaiting_approval saying \"awaiting approval\"", run.Status, run.Error)
			}
			for name, st := range jobStatuses(run) {
				if st != "waiting" {
					t.Errorf("job %s: got %s before approval, want waiting", name, st)
				}
			}
			if q := h.queuedJobs(t, id); len(q) != 0 {
				t.Errorf("queue before approval: got %v, want nothing queued", q)
			}
			if tl := h.timeline(t, id, "build"); !strings.Contains(tl, "awaiting approval") || !strings.Contains(tl, "mallory/hello") {
				t.Errorf("timeline of build: got %q, want it to say awaiting approval for fork mallory/hello", tl)
			}
			var listed apiv1.RunList
			h.mustAdmin(t, http.MethodGet, "/api/v1/runs?status=awaiting_approval&source=fork-approve", nil, http.StatusOK, &listed)
			if len(listed.Runs) != 1 || listed.Runs[0].ID != id {
				t.Errorf("runs with status awaiting_approval: got %d, want the one", len(listed.Runs))
			}

			auditor := h.newAdminToken(t, "fork auditor", auth.Auditor)
			if resp := h.call(t, auditor.Token, http.MethodPost, "/api/v1/runs/"+id+"/approve", ""); resp.status != http.StatusForbidden {
				t.Errorf("approve as auditor: got %d (%s), want 403", resp.status, resp.body)
			}
			if got := h.getRun(t, id).Status; got != apiv1.RunAwaitingApproval {
				t.Errorf("after the auditor's attempt: got status %s, want awaiting_approval", got)
			}

			approver := h.newAdminToken(t, "fork approver", auth.Admin)
			resp := h.call(t, approver.Token, http.MethodPost, "/api/v1/runs/"+id+"/approve", "")
			if resp.status != http.StatusOK {
				t.Fatalf("approve: got %d (%s), want 200", resp.status, resp.body)
			}
			var approved apiv1.Run
			resp.decode(t, &approved)
			want := map[string]string{"build": "queued", "only-fork": "queued", "pr-seven": "queued", "not-fork": "skipped"}
			if diff := cmp.Diff(want, jobStatuses(approved)); diff != "" {
				t.Errorf("jobs after approval (if: event.fork, event.number == 7) (-want +got):\n%s", diff)
			}
			if approved.Status != apiv1.RunPending || approved.Error != "" {
				t.Errorf("after approval: got status %q error %q, want pending without error", approved.Status, approved.Error)
			}
			if diff := cmp.Diff([]string{"build", "only-fork", "pr-seven"}, h.queuedJobs(t, id)); diff != "" {
				t.Errorf("queue after approval (-want +got):\n%s", diff)
			}
			if tl := h.timeline(t, id, "build"); !strings.Contains(tl, "approved by fork approver") {
				t.Errorf("timeline of build: got %q, want who approved it", tl)
			}
			var rec struct {
				SecretsWithheld bool   `json:"secrets_withheld"`
				ForkPolicy      string `json:"fork_policy"`
			}
			if err := json.Unmarshal(approved.Event, &rec); err != nil || rec.SecretsWithheld || rec.ForkPolicy != "approve" {
				t.Errorf("event of the approved run: got %s (%v), want fork_policy approve and secrets not withheld", approved.Event, err)
			}
			var entries apiv1.AuditList
			h.mustAdmin(t, http.MethodGet, "/api/v1/audit?action=run.approve&limit=10", nil, http.StatusOK, &entries)
			found := false
			for _, e := range entries.Entries {
				if e.Target == "run:"+id && e.Outcome == "allowed" && e.ActorName == "fork approver" {
					found = true
				}
			}
			if !found {
				t.Errorf("audit log: got %+v, want run.approve of run:%s allowed for \"fork approver\"", entries.Entries, id)
			}

			again := h.admin(t, http.MethodPost, "/api/v1/runs/"+id+"/approve", nil)
			if again.status != http.StatusConflict || !strings.Contains(again.apiError(t).Error, "not awaiting_approval") {
				t.Errorf("approve twice: got %d (%s), want 409 saying it is not awaiting approval", again.status, again.body)
			}
			if r := h.admin(t, http.MethodPost, "/api/v1/runs/nope/approve", nil); r.status != http.StatusNotFound {
				t.Errorf("approve a missing run: got %d, want 404", r.status)
			}
			// A rerun of the approved run needs an approval of its own.
			var child apiv1.RunRef
			h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+id+"/rerun", nil, http.StatusCreated, &child)
			if got := h.getRun(t, child.ID); got.Status != apiv1.RunAwaitingApproval || len(h.queuedJobs(t, child.ID)) != 0 {
				t.Errorf("rerun of a fork's approved run: got status %s, want awaiting_approval with nothing queued", got.Status)
			}
		})

		t.Run("an awaiting run can be cancelled", func(t *testing.T) {
			h.addForkSource(t, "fork-cancel", dir, "approve")
			id := h.forkRunID(t, "fork-cancel", "fc-1", baseSHA, headSHA)
			var run apiv1.Run
			h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+id+"/cancel", nil, http.StatusOK, &run)
			if run.Status != apiv1.RunCancelled {
				t.Errorf("cancel an awaiting run: got status %q, want cancelled", run.Status)
			}
			for name, st := range jobStatuses(run) {
				if st != "cancelled" {
					t.Errorf("job %s: got %s, want cancelled", name, st)
				}
			}
			if r := h.admin(t, http.MethodPost, "/api/v1/runs/"+id+"/approve", nil); r.status != http.StatusConflict {
				t.Errorf("approve a cancelled run: got %d, want 409", r.status)
			}
		})

		t.Run("run starts at once with secrets withheld", func(t *testing.T) {
			h.addForkSource(t, "fork-run", dir, "run")
			id := h.forkRunID(t, "fork-run", "fr-1", baseSHA, headSHA)
			run := h.getRun(t, id)
			if diff := cmp.Diff(baseJobs, jobNames(run)); diff != "" {
				t.Errorf("jobs: want the base commit's workflow (-want +got):\n%s", diff)
			}
			if run.Status != apiv1.RunPending || jobStatuses(run)["build"] != "queued" {
				t.Errorf("got run %s, build %s; want pending with build queued", run.Status, jobStatuses(run)["build"])
			}
			var rec struct {
				SecretsWithheld bool `json:"secrets_withheld"`
			}
			if err := json.Unmarshal(run.Event, &rec); err != nil || !rec.SecretsWithheld {
				t.Errorf("event: got %s (%v), want secrets_withheld true", run.Event, err)
			}
			if tl := h.timeline(t, id, "build"); !strings.Contains(tl, "secrets withheld") {
				t.Errorf("timeline of build: got %q, want it to say secrets are withheld", tl)
			}
			if r := h.admin(t, http.MethodPost, "/api/v1/runs/"+id+"/approve", nil); r.status != http.StatusConflict {
				t.Errorf("approve a run that is not awaiting: got %d, want 409", r.status)
			}
		})

		t.Run("ignore starts nothing", func(t *testing.T) {
			h.addForkSource(t, "fork-ignore", dir, "ignore")
			resp := h.deliverPR(t, "fork-ignore", "fi-1", pullRequest("mallory/hello", baseSHA, headSHA))
			var out struct {
				Ignored bool   `json:"ignored"`
				Reason  string `json:"reason"`
			}
			resp.decode(t, &out)
			if resp.status != http.StatusOK || !out.Ignored || !strings.Contains(out.Reason, "fork policy") {
				t.Errorf("got %d %s, want 200 ignored because of the fork policy", resp.status, resp.body)
			}
			if runs := h.runs(t, "fork-ignore"); len(runs) != 0 {
				t.Errorf("got %d runs, want none", len(runs))
			}
		})

		t.Run("a pull request from the same repository is unaffected", func(t *testing.T) {
			h.addForkSource(t, "fork-same", dir, "ignore")
			// It gets the source's secrets, so the one it declares must be
			// set (else the run fails at creation, naming it).
			h.mustAdmin(t, http.MethodPut, "/api/v1/secrets/DEPLOY_TOKEN?source=fork-same", `{"value": "same-repo-token"}`, http.StatusCreated, nil)
			resp := h.deliverPR(t, "fork-same", "fs-1", pullRequest("octo-org/hello", baseSHA, headSHA))
			var tr apiv1.TriggerResponse
			resp.decode(t, &tr)
			if resp.status != http.StatusOK || len(tr.Runs) != 1 {
				t.Fatalf("got %d (%s), want 200 and one run", resp.status, resp.body)
			}
			run := h.getRun(t, tr.Runs[0].ID)
			if diff := cmp.Diff([]string{"steal"}, jobNames(run)); diff != "" {
				t.Errorf("jobs: want the head commit's own workflow (-want +got):\n%s", diff)
			}
			if run.Status != apiv1.RunPending {
				t.Errorf("got status %s, want pending", run.Status)
			}
		})

		t.Run("an unknown policy is refused", func(t *testing.T) {
			resp := h.admin(t, http.MethodPost, "/api/v1/sources", apiv1.Source{Name: "fork-bad", Kind: "local", Path: dir, ForkPullRequests: "always"})
			if resp.status != http.StatusBadRequest || !strings.Contains(resp.apiError(t).Error, "approve, run or ignore") {
				t.Errorf("got %d (%s), want 400 naming approve, run or ignore", resp.status, resp.body)
			}
			var list apiv1.SourceList
			h.mustAdmin(t, http.MethodGet, "/api/v1/sources", nil, http.StatusOK, &list)
			got := map[string]string{}
			for _, s := range list.Sources {
				got[s.Name] = s.ForkPullRequests
			}
			for name, want := range map[string]string{"fork-approve": "approve", "fork-run": "run", "fork-ignore": "ignore"} {
				if got[name] != want {
					t.Errorf("listed source %s: got fork_pull_requests %q, want %q", name, got[name], want)
				}
			}
			if _, ok := got["fork-bad"]; ok {
				t.Errorf("the refused source was stored")
			}
		})
	})
}

// writeFile writes content to dir/name, making its directories.
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
