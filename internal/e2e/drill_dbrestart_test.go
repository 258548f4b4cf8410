package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/testsvc"
)

// privatePostgres is a PostgreSQL server of this test's own, which it may
// restart without disturbing the tests that share the machine's server.
type privatePostgres struct {
	dir, bin, port string
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 || os.Geteuid() != 0 {
		if testsvc.RequireServices() {
			t.Fatalf("the database-restart drill needs PostgreSQL's server binaries and root (found %v, euid %d)", bins, os.Geteuid())
		}
		t.Skip("the database-restart drill needs PostgreSQL's server binaries and root")
	}
	slices.Sort(bins)
	p := &privatePostgres{bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "kici-drill-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p.dir = dir
	t.Cleanup(func() {
		_ = p.pg("pg_ctl", "-D", p.dir, "stop", "-m", "immediate")
		os.RemoveAll(dir)
	})
	if out, err := exec.Command("chown", "postgres:postgres", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	_, port, _ := strings.Cut(freeAddr(t), ":")
	p.port = port
	if err := p.pg("initdb", "-D", dir, "-A", "trust", "-U", "kici"); err != nil {
		t.Fatal(err)
	}
	if err := p.pg("pg_ctl", "-D", dir, "-w", "-l", filepath.Join(dir, "server.log"),
		"-o", fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir), "start"); err != nil {
		t.Fatal(err)
	}
	return p
}

// pg runs one of the server's programs as the postgres user.
func (p *privatePostgres) pg(prog string, args ...string) error {
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, prog)}, args...)...)
	// Output goes to a file, not a pipe: the server pg_ctl starts would
	// inherit a pipe and keep it open, and waiting for it would hang.
	out, err := os.CreateTemp("", "kici-drill-pg-out-")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		text, _ := os.ReadFile(out.Name())
		return fmt.Errorf("%s %v: %v: %s", prog, args, err, text)
	}
	return nil
}

func (p *privatePostgres) url() string {
	return fmt.Sprintf("postgres://kici@127.0.0.1:%s/postgres?sslmode=disable", p.port)
}

// TestDrillDatabaseServerRestarted (PostgreSQL): the database server is
// restarted while jobs run and wait. The orchestrator recovers without a
// restart of its own: the same process finishes the run, and every step
// ran exactly once.
func TestDrillDatabaseServerRestarted(t *testing.T) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	o := startOrchestrator(t, pg.url())
	pid := o.cmd.Process.Pid
	marks := t.TempDir()
	o.addRepo(t, map[string]string{"ci.yml": fmt.Sprintf(`
on: {push: {}}
jobs:
  work:
    matrix: {n: ["1", "2", "3", "4", "5", "6"]}
    steps:
      - run: echo ran >> %[1]s/ran-${{ matrix.n }}; touch %[1]s/started-${{ matrix.n }}; while [ ! -e %[1]s/go ]; do sleep 0.02; done
  after:
    needs: [work]
    steps: [{run: "echo ran >> %[1]s/ran-after"}]
`, marks)})
	startAgent(t, o, "", "drill-a", nil, "KICI_AGENT_CONCURRENCY=2")
	startAgent(t, o, "", "drill-b", nil, "KICI_AGENT_CONCURRENCY=2")
	id := o.push(t)
	waitFor(t, 30*time.Second, "four jobs to start", func() bool {
		n := 0
		for i := 1; i <= 6; i++ {
			if fileExists(filepath.Join(marks, "started-"+strconv.Itoa(i))) {
				n++
			}
		}
		return n == 4
	})
	if err := pg.pg("pg_ctl", "-D", pg.dir, "-w", "-m", "fast", "restart"); err != nil {
		t.Fatal(err)
	}
	if err := touch(filepath.Join(marks, "go")); err != nil {
		t.Fatal(err)
	}
	var status string
	waitFor(t, 60*time.Second, "the run to end", func() bool {
		r, ok := tryRun(o, id)
		status = r.Status
		return ok && ended(r)
	})
	if status != "success" {
		t.Fatalf("run after the database restart: got %s, want success", status)
	}
	if o.cmd.Process.Pid != pid || o.cmd.ProcessState != nil {
		t.Errorf("the orchestrator was restarted (pid %d, was %d)", o.cmd.Process.Pid, pid)
	}
	for _, name := range []string{"1", "2", "3", "4", "5", "6", "after"} {
		if got := readLines(t, filepath.Join(marks, "ran-"+name)); len(got) != 1 {
			t.Errorf("step of job %s ran %d times, want once", name, len(got))
		}
	}
}
