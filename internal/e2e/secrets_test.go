package e2e

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to read every table

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/secrets"
)

// secretsWorkflow: "uses" declares two secrets and prints them, one in
// two pieces with a pause between (so that the line before it goes out in
// an earlier log chunk); "plain" declares none and must not see them;
// nobody declares UNUSED.
const secretsWorkflow = `
on: {push: {}}
jobs:
  uses:
    runs-on: [linux]
    secrets: [DEPLOY_TOKEN, SPLIT_SECRET]
    steps:
      - run: echo "token=$DEPLOY_TOKEN"
      - run: |
          echo "before the split"
          printf '%s' "${SPLIT_SECRET:0:9}"
          sleep 0.4
          printf '%s\n' "${SPLIT_SECRET:9}"
          echo "after the split"
      - run: echo "b64=$(printf '%s' "$DEPLOY_TOKEN" | base64 -w0)"
  plain:
    runs-on: [linux]
    steps:
      - run: echo "deploy=[${DEPLOY_TOKEN:-unset}] unused=[${UNUSED:-unset}]"
`

func randomValue(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// TestSecretsNeverLeak stores secrets, runs a job that prints them, and
// looks for their plaintext everywhere kici keeps or sends anything: the
// database (the SQLite files, or every PostgreSQL table), the stored logs
// and the rest of the data dir, every API answer, and the orchestrator's
// own log. Then it rotates the key and runs the job again.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		values := map[string]string{
			"DEPLOY_TOKEN": randomValue("dEpl0y-"),
			"SPLIT_SECRET": randomValue("spl1t-"),
			"UNUSED":       randomValue("unus3d-"),
		}
		var answers [][]byte
		call := func(method, path string, in any, want int) []byte {
			t.Helper()
			body := o.raw(t, method, path, in, want)
			answers = append(answers, body)
			return body
		}
		for name, v := range values {
			call("PUT", "/api/v1/secrets/"+name, apiv1.SecretRequest{Value: v}, http.StatusCreated)
		}
		call("GET", "/api/v1/secrets", nil, http.StatusOK)
		o.addRepo(t, map[string]string{"ci.yml": secretsWorkflow})
		startAgent(t, o, "", "secret-agent", []string{"linux"})

		check := func(id string) {
			t.Helper()
			r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
			if r.Status != "success" {
				t.Fatalf("run %s: got %s (%+v), want success", id, r.Status, r.Jobs)
			}
			call("GET", "/api/v1/runs/"+id, nil, http.StatusOK)
			uses := strings.Join(o.logs(t, id, "uses"), "\n")
			for _, want := range []string{"token=***", "before the split\n***\nafter the split", "b64=***"} {
				if !strings.Contains(uses, want) {
					t.Errorf("logs of uses: want %q in\n%s", want, uses)
				}
			}
			if plain := o.logs(t, id, "plain"); !strings.Contains(strings.Join(plain, "\n"), "deploy=[unset] unused=[unset]") {
				t.Errorf("logs of plain: got %q, want the secrets unset (it declares none)", plain)
			}
			for _, job := range []string{"uses", "plain"} {
				call("GET", fmt.Sprintf("/api/v1/runs/%s/jobs/%s/logs", id, job), nil, http.StatusOK)
			}
		}
		check(o.push(t))

		// Rotate the key; the next run gets the same values.
		var rot apiv1.RotateKeyResponse
		body := call("POST", "/api/v1/secrets/rotate-key", apiv1.RotateKeyRequest{NewKey: secrets.GenerateKey().Hex()}, http.StatusOK)
		if err := json.Unmarshal(body, &rot); err != nil || rot.Resealed != 3 || rot.KeyVersion != 2 {
			t.Fatalf("rotate: got %s (%v), want 3 resealed at key version 2", body, err)
		}
		check(o.push(t))

		// A job declaring a secret nobody set fails, naming it.
		o.api(t, "DELETE", "/api/v1/secrets/SPLIT_SECRET", nil, nil, http.StatusOK)
		id := o.push(t)
		r := o.waitRun(t, id, 30*time.Second, "run to end", ended)
		if j := job(t, r, "uses"); j.Status != "failure" || !strings.Contains(j.Error, "SPLIT_SECRET, which is not set") || j.StartedAt != nil {
			t.Errorf("job with a missing secret: got %s %q (started %v), want failure naming SPLIT_SECRET before it ran", j.Status, j.Error, j.StartedAt)
		}
		if r.Status != "failure" || !strings.Contains(r.Error, "SPLIT_SECRET (declared by uses)") {
			t.Errorf("run with a missing secret: got %s %q, want failure naming SPLIT_SECRET and uses", r.Status, r.Error)
		}
		call("GET", "/api/v1/audit?limit=1000", nil, http.StatusOK)
		call("GET", "/api/v1/queue", nil, http.StatusOK)

		var stores []string
		if dbURL == "" {
			stores = append(stores, "data dir")
		} else {
			stores = append(stores, "PostgreSQL tables", "data dir")
		}
		for name, v := range values {
			forms := []string{v, base64.StdEncoding.EncodeToString([]byte(v))}
			for _, f := range forms {
				for i, a := range answers {
					if bytes.Contains(a, []byte(f)) {
						t.Errorf("API answer %d holds the value of %s: %s", i, name, a)
					}
				}
				if strings.Contains(o.output.String(), f) {
					t.Errorf("the orchestrator's log holds the value of %s", name)
				}
				if where := findInDir(t, o.dataDir, f); where != "" {
					t.Errorf("%s holds the value of %s", where, name)
				}
				if dbURL != "" {
					if where := findInPostgres(t, dbURL, f); where != "" {
						t.Errorf("PostgreSQL table %s holds the value of %s", where, name)
					}
				}
			}
		}
		t.Logf("looked for %d secret values in %v, %d API answers and the orchestrator's log", len(values), stores, len(answers))
	})
}

// raw calls the API and returns the answer's body, failing the test
// unless the status is want.
func (o *orchestrator) raw(t *testing.T, method, path string, in any, want int) []byte {
	t.Helper()
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+o.addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: got status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	return data
}

// findInDir returns the first file under dir that contains s, or "".
func findInDir(t *testing.T, dir, s string) string {
	t.Helper()
	var found string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(s)) {
			found = path
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return found
}

// findInPostgres returns the first table of the test's schema with a row
// whose text contains s, or "".
func findInPostgres(t *testing.T, dbURL, s string) string {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if len(tables) < 10 {
		t.Fatalf("found %d tables in the test schema, want all of kici's", len(tables))
	}
	for _, table := range tables {
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM %q AS t WHERE strpos(t::text, $1) > 0`, table)
		if err := db.QueryRowContext(t.Context(), q, s).Scan(&n); err != nil {
			t.Fatalf("search %s: %v", table, err)
		}
		if n > 0 {
			return table
		}
	}
	return ""
}

// TestUnsetSecretFailsTheRunBeforeAnyJob: a workflow whose deploy job
// declares a secret nobody set fails when the push creates it: the run's
// error names the secret and the job, and no job reaches the agent (the
// build job's step, which would leave a mark, never runs).
func TestUnsetSecretFailsTheRunBeforeAnyJob(t *testing.T) {
	t.Parallel()
	o := startOrchestrator(t, "")
	marks := t.TempDir()
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  build:
    steps:
      - run: touch %s/build-ran
  deploy:
    needs: [build]
    secrets: [NEVER_SET_TOKEN]
    steps:
      - run: echo deploying
`, marks)})
	startAgent(t, o, "", "unset-secret-agent", nil)
	id := o.push(t)
	r := o.waitRun(t, id, 30*time.Second, "the run to end", ended)
	if r.Status != "failure" || !strings.Contains(r.Error, "NEVER_SET_TOKEN") || !strings.Contains(r.Error, "deploy") {
		t.Fatalf("run %s (%q), want failure naming NEVER_SET_TOKEN and deploy", r.Status, r.Error)
	}
	for _, j := range r.Jobs {
		if j.AgentID != "" || j.StartedAt != nil {
			t.Errorf("job %s reached agent %q (started %v), want no job run", j.Name, j.AgentID, j.StartedAt)
		}
	}
	if fileExists(filepath.Join(marks, "build-ran")) {
		t.Error("the build job's step ran")
	}
	// Set, the same workflow runs.
	o.api(t, "PUT", "/api/v1/secrets/NEVER_SET_TOKEN", apiv1.SecretRequest{Value: randomValue("tok-")}, nil, http.StatusCreated)
	id = o.push(t)
	if r := o.waitRun(t, id, 60*time.Second, "the second run to end", ended); r.Status != "success" {
		t.Fatalf("with the secret set: run %s (%s), want success", r.Status, r.Error)
	}
}
