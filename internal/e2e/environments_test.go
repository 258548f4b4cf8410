package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// TestEnvironmentApprovalAndScopedSecret: production requires an approval
// and takes runs of main only, and holds a secret of its own.
//   - A push to main runs build, then holds ship in awaiting_approval (it
//     reaches no agent) until the admin approves the run; ship then gets
//     production's secret (masked in its log) and the run succeeds; ship's
//     timeline names the approver.
//   - A push to dev fails ship: dev may not deploy to production.
//   - A job without the environment that declares the secret does not get
//     it: its run fails at creation, naming the secret and the job.
func TestEnvironmentApprovalAndScopedSecret(t *testing.T) {
	t.Parallel()
	o := startOrchestrator(t, "")
	repo := o.addRepo(t, map[string]string{
		"deploy.yml": `
on: {push: {}}
jobs:
  build:
    steps:
      - run: echo built
  ship:
    needs: [build]
    environment: production
    secrets: [DEPLOY_KEY]
    steps:
      - run: echo "deploying with [$DEPLOY_KEY] of ${#DEPLOY_KEY} bytes"
`,
		"leak.yml": `
on: {manual: {}}
jobs:
  leak:
    secrets: [DEPLOY_KEY]
    steps:
      - run: echo "[$DEPLOY_KEY]"
`,
	})
	key := randomValue("prod-key-")
	o.api(t, "PUT", "/api/v1/environments/production", apiv1.EnvironmentRequest{RequireApproval: true, Branches: []string{"main"}}, nil, http.StatusOK)
	o.api(t, "PUT", "/api/v1/secrets/DEPLOY_KEY?environment=production", apiv1.SecretRequest{Value: key}, nil, http.StatusCreated)
	startAgent(t, o, "", "env-agent", nil)

	trigger := func(ref, workflow, event string) string {
		var tr apiv1.TriggerResponse
		o.api(t, "POST", "/api/v1/sources/repo/trigger", apiv1.TriggerRequest{Event: event, Ref: ref, Workflows: []string{workflow}}, &tr, http.StatusOK)
		if len(tr.Runs) != 1 {
			t.Fatalf("trigger %s on %s started %d runs, want 1: %+v", workflow, ref, len(tr.Runs), tr.Decisions)
		}
		return tr.Runs[0].ID
	}
	job := func(r apiv1.Run, name string) apiv1.Job {
		for _, j := range r.Jobs {
			if j.Name == name {
				return j
			}
		}
		t.Fatalf("run %s has no job %s", r.ID, name)
		return apiv1.Job{}
	}

	id := trigger("main", "deploy", "push")
	r := o.waitRun(t, id, 60*time.Second, "ship to await approval", func(r apiv1.Run) bool {
		return job(r, "ship").Status == apiv1.JobAwaitingApproval
	})
	if b := job(r, "build"); b.Status != "success" {
		t.Fatalf("build is %s, want success before ship is held", b.Status)
	}
	if s := job(r, "ship"); s.AgentID != "" || s.StartedAt != nil || r.Status != "running" {
		t.Fatalf("held ship: agent %q, started %v, run %s; want no agent, not started, run running", s.AgentID, s.StartedAt, r.Status)
	}
	var q apiv1.Queue
	o.api(t, "GET", "/api/v1/queue", nil, &q, http.StatusOK)
	if slices.ContainsFunc(q.Jobs, func(e apiv1.QueueEntry) bool { return e.RunID == id }) {
		t.Errorf("the held job is in the queue: %+v", q.Jobs)
	}
	// An auditor may not approve.
	var aud apiv1.AdminToken
	o.api(t, "POST", "/api/v1/tokens", apiv1.AdminTokenRequest{Name: "env-auditor", Role: "auditor"}, &aud, http.StatusCreated)
	req, err := http.NewRequest("POST", "http://"+o.addr+"/api/v1/runs/"+id+"/approve", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aud.Token)
	resp, err := o.http().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an auditor's approve: %d, want 403", resp.StatusCode)
	}

	// The admin approves from the run's page.
	b := newBrowser(t, o)
	if p := b.login(o.token); p.status != http.StatusSeeOther {
		t.Fatalf("dashboard login: %d", p.status)
	}
	page := b.get("/runs/" + id)
	if !strings.Contains(page.body, `id="approve"`) || !strings.Contains(page.body, ">awaiting_approval<") {
		t.Fatalf("the run page of the held run has no approve button or awaiting_approval job:\n%s", page.body)
	}
	if p := b.do(http.MethodPost, "/runs/"+id+"/approve", url.Values{"csrf": {page.csrf(t)}}); p.status != http.StatusSeeOther {
		t.Fatalf("approve from the page: %d %s", p.status, p.body)
	}
	r = o.waitRun(t, id, 60*time.Second, "the approved run to end", ended)
	if r.Status != "success" {
		t.Fatalf("approved run: %s (%s), want success", r.Status, r.Error)
	}
	lines := strings.Join(o.logs(t, id, "ship"), "\n")
	if strings.Contains(lines, key) || !strings.Contains(lines, fmt.Sprintf("deploying with [***] of %d bytes", len(key))) {
		t.Errorf("ship's log does not show the masked production key of %d bytes:\n%s", len(key), lines)
	}
	// The provisioning section of the log is the job's timeline.
	if !strings.Contains(lines, "waiting for approval to deploy to production") || !strings.Contains(lines, "approved by") {
		t.Errorf("ship's timeline does not show the hold and the approval:\n%s", lines)
	}
	// Nothing is left to approve.
	o.api(t, "POST", "/api/v1/runs/"+id+"/approve", nil, nil, http.StatusConflict)

	// dev may not deploy to production.
	if out, err := exec.Command("git", "-C", repo, "branch", "dev").CombinedOutput(); err != nil {
		t.Fatalf("git branch dev: %v: %s", err, out)
	}
	id = trigger("dev", "deploy", "push")
	r = o.waitRun(t, id, 60*time.Second, "the dev run to end", ended)
	if s := job(r, "ship"); r.Status != "failure" || s.Status != "failure" || !strings.Contains(s.Error, `environment "production" accepts runs of branches main only`) {
		t.Errorf("dev run %s, ship %s (%q); want both failed naming the branch rule", r.Status, s.Status, s.Error)
	}

	// A job without the environment never gets its secret.
	id = trigger("main", "leak", "manual")
	r = o.waitRun(t, id, 30*time.Second, "the leak run to end", ended)
	if r.Status != "failure" || !strings.Contains(r.Error, "DEPLOY_KEY (declared by leak)") {
		t.Errorf("leak run %s (%q), want failure naming DEPLOY_KEY and leak", r.Status, r.Error)
	}
	if s := job(r, "leak"); s.StartedAt != nil {
		t.Errorf("the leak job started")
	}
}
