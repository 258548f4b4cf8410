package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
)

// adminBuild builds kici-admin into binDir once, for the tests that drive
// it as a user would.
var adminBuild = sync.OnceValue(func() error {
	cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "kici-admin"), "github.com/kici-dev/kici/cmd/kici-admin")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build kici-admin: %w\n%s", err, out)
	}
	return nil
})

// kiciAdmin runs the kici-admin binary against o with token and returns
// its stdout, stderr and exit status.
func kiciAdmin(t *testing.T, o *orchestrator, token string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if err := adminBuild(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kici-admin"), args...)
	cmd.Env = append(minimalEnv(), "KICI_ADMIN_URL=http://"+o.addr, "KICI_ADMIN_TOKEN="+token)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("kici-admin %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), out.String(), errOut.String())
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("kici-admin %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// TestTriggerNamedWorkflowOnly: `kici-admin trigger --workflow` (a real
// kici-admin process, against a real orchestrator and agent) starts only
// the named one of two manual workflows, which runs to success on the
// agent while the other never runs; the run records the token's name as
// its actor; and an unknown name exits 1 listing the valid ones and starts
// nothing.
func TestTriggerNamedWorkflowOnly(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		marks := t.TempDir()
		wf := func(name string) string {
			return fmt.Sprintf("name: %[1]s\non: {manual: {}}\njobs:\n  go:\n    runs-on: [linux]\n    steps:\n      - run: touch %[2]s/%[1]s\n", name, marks)
		}
		o.addRepo(t, map[string]string{"deploy.yml": wf("deploy"), "release.yml": wf("release")})
		startAgent(t, o, "", "agent-a", []string{"linux"})
		var tok apiv1.AdminToken
		o.api(t, "POST", "/api/v1/tokens", apiv1.AdminTokenRequest{Name: "release-bot", Role: "admin"}, &tok, http.StatusCreated)

		_, stderr, code := kiciAdmin(t, o, tok.Token, "trigger", "repo", "--event", "manual", "--workflow", "deploy", "--workflow", "nope")
		if code != 1 {
			t.Errorf("unknown workflow: got exit %d, want 1", code)
		}
		if want := `no workflow named "nope"`; !strings.Contains(stderr, want) || !strings.Contains(stderr, "the workflows there are: deploy, release") {
			t.Errorf("unknown workflow: got stderr %q, want it to contain %q and list deploy, release", stderr, want)
		}
		var none apiv1.RunList
		o.api(t, "GET", "/api/v1/runs?source=repo", nil, &none, http.StatusOK)
		if len(none.Runs) != 0 {
			t.Fatalf("unknown workflow: got runs %+v, want none", none.Runs)
		}

		stdout, _, code := kiciAdmin(t, o, tok.Token, "trigger", "repo", "--event", "manual", "--workflow", "deploy", "--wait", "-o", "json")
		if code != 0 {
			t.Fatalf("trigger --workflow deploy --wait: got exit %d, want 0", code)
		}
		var out struct {
			Runs []apiv1.RunRef `json:"runs"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("decode stdout %q: %v", stdout, err)
		}
		if len(out.Runs) != 1 || out.Runs[0].Workflow != "deploy" {
			t.Fatalf("got runs %+v, want one run of deploy", out.Runs)
		}
		var all apiv1.RunList
		o.api(t, "GET", "/api/v1/runs?source=repo", nil, &all, http.StatusOK)
		var got []string
		for _, r := range all.Runs {
			got = append(got, r.Workflow+" "+r.Status+" by "+r.Actor)
		}
		if diff := cmp.Diff([]string{"deploy success by release-bot"}, got); diff != "" {
			t.Errorf("runs of the source (-want +got):\n%s", diff)
		}
		if !fileExists(filepath.Join(marks, "deploy")) {
			t.Errorf("deploy's step left no mark in %s", marks)
		}
		if fileExists(filepath.Join(marks, "release")) {
			t.Errorf("release ran, want only deploy to run")
		}
		show, _, code := kiciAdmin(t, o, tok.Token, "runs", "show", out.Runs[0].ID)
		if code != 0 || !strings.Contains(show, "actor:") || !strings.Contains(show, "release-bot") {
			t.Errorf("runs show: got exit %d and %q, want 0 and an actor line naming release-bot", code, show)
		}
	})
}
