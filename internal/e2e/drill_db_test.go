package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to end the orchestrator's connections

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/testsvc"
)

// TestDrillDatabaseConnectionsDropped (PostgreSQL): every connection of
// the orchestrator is terminated by the server, twice, while jobs run and
// wait. The server itself keeps running (other tests share it). The
// orchestrator recovers without a restart of its own: the run succeeds
// and every step ran exactly once.
func TestDrillDatabaseConnectionsDropped(t *testing.T) {
	t.Parallel()
	const as, bs = 2, 4
	base := testsvc.PostgresURL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	app := "kici-drill-" + hex.EncodeToString(suffix[:])
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()

	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	terminate := func() int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var n int
		err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1`, app).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	o := startOrchestrator(t, u.String())
	marks := t.TempDir()
	o.addRepo(t, map[string]string{"ci.yml": matrixWorkflow(marks, as, bs)})
	startAgent(t, o, "", "db-drill", nil, "KICI_AGENT_CONCURRENCY=4")
	id := o.push(t)
	waitFor(t, 30*time.Second, "4 jobs to start", func() bool {
		return countGlob(t, filepath.Join(marks, "started-*")) >= 4
	})
	pid := o.cmd.Process.Pid
	n := terminate()
	if n == 0 {
		t.Fatalf("no connection with application_name %s to terminate", app)
	}
	t.Logf("terminated %d connections", n)
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	// Drop them again while the first jobs finish and the rest dispatch.
	time.Sleep(300 * time.Millisecond)
	t.Logf("terminated %d connections", terminate())

	// A request that meets a just-terminated connection may fail once
	// (500); the drill is about recovery, so poll past such answers.
	var r apiv1.Run
	waitFor(t, 60*time.Second, "run to end", func() bool {
		got, ok := tryRun(o, id)
		if ok {
			r = got
		}
		return ok && ended(r)
	})
	select {
	case <-o.done:
		t.Fatalf("orchestrator exited: %v", o.cmd.ProcessState)
	default:
	}
	if o.cmd.Process.Pid != pid {
		t.Fatal("orchestrator was restarted")
	}
	if r.Status != "success" {
		t.Fatalf("run: got %s (%s), want success; jobs %+v", r.Status, r.Error, r.Jobs)
	}
	assertRanOnce(t, marks, as, bs)
}

// tryRun reads a run, reporting false on any failure instead of failing
// the test.
func tryRun(o *orchestrator, id string) (apiv1.Run, bool) {
	var r apiv1.Run
	req, err := http.NewRequest("GET", "http://"+o.addr+"/api/v1/runs/"+id, nil)
	if err != nil {
		return r, false
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		o.t.Logf("GET run %s: status %d (tolerated while connections recover)", id, resp.StatusCode)
		return r, false
	}
	return r, json.NewDecoder(resp.Body).Decode(&r) == nil
}
