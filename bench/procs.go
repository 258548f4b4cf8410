package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one child (orchestrator or agent) whose output goes to a log
// file, stopped politely (SIGTERM, then SIGKILL after 10 s).
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func startProcess(name, bin, dir string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(minimalEnv(), env...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// minimalEnv is the environment every child starts from: enough to find
// git and bash, and no KICI_ variable of the caller's.
func minimalEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func freeAddr() (string, error) { return freeAddrOn("127.0.0.1") }

// freeAddrOn returns a free TCP address on one of this host's addresses.
func freeAddrOn(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// server is a kici-orchestrator process (or, for the profile, one
// running inside this process: proc is then nil).
type server struct {
	*client
	addr    string
	proc    *process
	dataDir string // KICI_DATA_DIR ("" in-process)
}

// pid is the orchestrator's process id (this process's for one running
// in-process).
func (o *server) pid() int {
	if o.proc == nil {
		return os.Getpid()
	}
	return o.proc.pid()
}

// startOrchestrator starts kici-orchestrator serve on a free loopback port
// with a fresh data dir, on SQLite (dbURL "") or PostgreSQL, logging JSON at
// info level to dir/orchestrator.log, and waits until it is ready.
func (h *harness) startOrchestrator(ctx context.Context, sc *scope, dbURL string) (*server, error) {
	return h.startOrchestratorWith(ctx, sc, dbURL, orchOptions{})
}

// orchOptions changes what startOrchestrator does: the address to listen
// on (default a free loopback port), the log level (default info) and more
// environment.
type orchOptions struct {
	addr, logLevel string
	env            []string
}

func (h *harness) startOrchestratorWith(ctx context.Context, sc *scope, dbURL string, opt orchOptions) (*server, error) {
	dir := h.dir("orchestrator")
	if opt.logLevel == "" {
		opt.logLevel = "info"
	}
	addr := opt.addr
	if addr == "" {
		var err error
		if addr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	token := "bench-" + randomHex(8)
	dataDir := filepath.Join(dir, "data")
	env := []string{
		"KICI_HTTP_ADDR=" + addr,
		"KICI_PUBLIC_URL=http://" + addr,
		"KICI_DATA_DIR=" + dataDir,
		"KICI_DATABASE_URL=" + dbURL,
		"KICI_BOOTSTRAP_ADMIN_TOKEN=" + token,
		"KICI_LOG_FORMAT=json",
		"KICI_LOG_LEVEL=" + opt.logLevel,
	}
	env = append(env, opt.env...)
	if dbURL != "" {
		// Required with PostgreSQL (SQLite generates one into the data dir).
		env = append(env, "KICI_SECRET_KEY="+randomHex(32))
	}
	p, err := startProcess("orchestrator", filepath.Join(h.bin, "kici-orchestrator"), dir, env, "serve")
	if err != nil {
		return nil, err
	}
	sc.add(p.stop)
	o := &server{client: newClient(addr, token), addr: addr, proc: p, dataDir: dataDir}
	err = poll(ctx, 30*time.Second, "orchestrator ready", func() bool { return !p.exited() && o.ready(ctx) })
	if err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, p.logPath)
	}
	return o, nil
}

// startAgent starts a kici-agent with a fresh agent token and work dir,
// logging JSON at info level, and waits until the orchestrator lists it.
func (h *harness) startAgent(ctx context.Context, sc *scope, o *server, id string, waitConnected bool) (*process, error) {
	token, err := o.agentToken(ctx)
	if err != nil {
		return nil, err
	}
	dir := h.dir(id)
	p, err := startProcess(id, filepath.Join(h.bin, "kici-agent"), dir, []string{
		"KICI_ORCHESTRATOR_URL=ws://" + o.addr + "/ws",
		"KICI_AGENT_TOKEN=" + token,
		"KICI_AGENT_ID=" + id,
		"KICI_AGENT_WORKDIR=" + filepath.Join(dir, "work"),
		"KICI_LOG_FORMAT=json",
		"KICI_LOG_LEVEL=info",
	})
	if err != nil {
		return nil, err
	}
	sc.add(p.stop)
	if !waitConnected {
		return p, nil
	}
	err = poll(ctx, 30*time.Second, "agent "+id+" connected", func() bool {
		if p.exited() {
			return false
		}
		list, err := o.agents(ctx)
		if err != nil {
			return false
		}
		for _, a := range list {
			if a.ID == id {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, p.logPath)
	}
	return p, nil
}
