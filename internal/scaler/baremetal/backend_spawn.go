package baremetal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/scaler"
)

// Spawn starts the label set's agent binary. It returns once the process
// runs (EventProvisioning, EventReady, EventConnecting); an exit before
// MarkRegistered is reported later as EventFailed. A binary that is
// missing, not executable or refused by the kernel gives an EventFailed and
// a DeterministicSpawnError. A cancelled ctx kills a process already
// started and removes its files.
func (b *Backend) Spawn(ctx context.Context, req scaler.SpawnRequest) (scaler.Handle, error) {
	if err := ctx.Err(); err != nil {
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, err)
	}
	if err := checkAgentID(req.AgentID); err != nil {
		return scaler.Handle{}, err
	}
	log := b.log.With("agent_id", req.AgentID, "job_id", req.BoundJobID)
	emit := func(typ, detail string) {
		if req.OnEvent != nil {
			req.OnEvent(scaler.Event{AgentID: req.AgentID, Type: typ, Detail: detail, Time: b.cfg.Now()})
		}
	}
	refuse := func(err error) (scaler.Handle, error) {
		emit(scaler.EventFailed, err.Error())
		return scaler.Handle{}, err
	}
	if b.cfgErr != nil {
		return refuse(scaler.Refused("bare-metal scaler %q: %w", b.cfg.Name, b.cfgErr))
	}
	if !supported {
		return refuse(scaler.Refused("bare-metal scaler %q: %w", b.cfg.Name, errUnsupported))
	}
	path := req.LabelSet.BinaryPath
	if abs, err := filepath.Abs(path); err == nil && path != "" {
		path = abs
	}
	emit(scaler.EventProvisioning, "starting agent process "+path)
	if err := checkExecutable(path); err != nil {
		return refuse(scaler.Refused("agent binary %q: %w", path, err))
	}
	if err := b.reserve(req.AgentID); err != nil {
		return scaler.Handle{}, err
	}
	defer b.unreserve(req.AgentID)

	dir, logPath := b.agentDir(req.AgentID), filepath.Join(b.logsDir(), req.AgentID+".log")
	logFile, err := b.prepareFiles(dir, logPath)
	if err != nil {
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, err)
	}
	removeFiles := func() {
		_ = os.RemoveAll(dir)
		_ = os.Remove(logPath)
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   []string{path},
		Dir:    dir,
		Env:    agentEnv(os.LookupEnv, req, dir),
		Stdout: logFile, // stdin stays nil: /dev/null
		Stderr: logFile,
	}
	setProcAttr(cmd)
	if err := ctx.Err(); err != nil {
		logFile.Close()
		removeFiles()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, err)
	}
	err = cmd.Start()
	logFile.Close() // the child has its own copy
	if err != nil {
		removeFiles()
		return refuse(scaler.Refused("start agent process %q: %w", path, err))
	}

	pid := cmd.Process.Pid
	rec := record{V: recordVersion, PID: pid, BootID: bootID(), WorkDir: dir, LogPath: logPath}
	if info, err := procStat(pid); err == nil {
		rec.StartTime = info.StartTime
	}
	h := scaler.Handle{
		AgentID: req.AgentID, Scaler: req.Scaler, Ref: strconv.Itoa(pid),
		Blob: rec.encode(), SpawnedAt: b.cfg.Now(),
	}
	p := newAgentProc(req.AgentID, rec, h, log, b.cfg.Now, true)
	p.onEvent = req.OnEvent
	spawned := make(chan struct{})
	defer close(spawned)

	b.mu.Lock()
	if b.closed {
		// Close has taken its list of agents: this one is not on it.
		b.mu.Unlock()
		_ = killGroup(pid) // unreaped, the child still holds its PID
		_ = cmd.Wait()
		removeFiles()
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, errClosed)
	}
	b.agents[req.AgentID] = p
	b.wg.Add(1)
	b.mu.Unlock()
	go b.watchChild(p, cmd, spawned)
	log.Info("agent process started", "pid", pid, "binary", path)
	if b.afterStart != nil {
		b.afterStart()
	}

	if err := ctx.Err(); err != nil {
		b.unwind(ctx, p)
		return scaler.Handle{}, fmt.Errorf("spawn agent %q: %w", req.AgentID, err)
	}
	emit(scaler.EventReady, fmt.Sprintf("PID %d", pid))
	emit(scaler.EventConnecting, "waiting for the agent to register")
	return h, nil
}

// unwind undoes a spawn whose ctx ended after the process started: it kills
// the process at once and removes its files.
func (b *Backend) unwind(ctx context.Context, p *agentProc) {
	p.mu.Lock()
	p.destroying = true
	p.mu.Unlock()
	p.hurryUp()
	_ = b.Destroy(context.WithoutCancel(ctx), p.id)
	_ = os.Remove(p.rec.LogPath)
}

// reserve marks agentID as being spawned; it refuses an id that is already
// tracked or being spawned, and any spawn after Close.
func (b *Backend) reserve(agentID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return fmt.Errorf("spawn agent %q: %w", agentID, errClosed)
	case b.starting[agentID] || b.agents[agentID] != nil:
		return fmt.Errorf("spawn agent %q: already spawned", agentID)
	}
	b.starting[agentID] = true
	return nil
}

func (b *Backend) unreserve(agentID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.starting, agentID)
}

// prepareFiles creates a fresh, empty work dir and the log file.
func (b *Backend) prepareFiles(dir, logPath string) (*os.File, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("remove stale work dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create work dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("create log file: %w", err)
	}
	return f, nil
}

// checkAgentID refuses an id that is not a plain file name: it names the
// agent's work dir and log file.
func checkAgentID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\\\x00") {
		return fmt.Errorf("spawn agent %q: the agent id must be a plain file name", id)
	}
	return nil
}

// checkExecutable reports why path cannot be run as the agent: it does not
// exist, is not a regular file, or has no execute permission bit.
func checkExecutable(path string) error {
	if path == "" {
		return errors.New("binaryPath is empty")
	}
	st, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in the message
		}
		return err
	}
	switch {
	case !st.Mode().IsRegular():
		return fmt.Errorf("not a regular file (mode %s)", st.Mode())
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("not executable (mode %s)", st.Mode())
	}
	return nil
}
