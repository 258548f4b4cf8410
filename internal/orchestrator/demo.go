package orchestrator

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newDemoCmd(stdout, stderr io.Writer) *cobra.Command {
	var example, agentBin string
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the bundled example end to end on a throw-away orchestrator",
		Long: `Start an orchestrator on SQLite in a temporary data dir, listening on a free
loopback port; start one kici-agent next to it; register a copy of the
example repository as a local source; trigger a push to main; follow the
run's live logs; print "run <id> <status>" and exit 0 only on success.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), stdout, stderr, example, agentBin, keep)
		},
	}
	cmd.Flags().StringVar(&example, "example", "examples/hello", "directory of the example repository to run")
	cmd.Flags().StringVar(&agentBin, "agent", "", "path of the kici-agent binary (default: next to this binary)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary directory (data dir, logs) for inspection")
	return cmd
}

func runDemo(ctx context.Context, stdout, stderr io.Writer, example, agentBin string, keep bool) error {
	if agentBin == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find kici-agent: %w", err)
		}
		agentBin = filepath.Join(filepath.Dir(self), "kici-agent")
	}
	if _, err := os.Stat(agentBin); err != nil {
		return fmt.Errorf("kici-agent binary %s: %w (run make build first)", agentBin, err)
	}
	tmp, err := os.MkdirTemp("", "kici-demo-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintf(stdout, "demo files in %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	repo := filepath.Join(tmp, "hello")
	if err := makeDemoRepo(ctx, example, repo); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(tmp, "orchestrator.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	logger, err := newLogger(logFile, "info", "json")
	if err != nil {
		return err
	}
	token := randomHex(16)
	cfg, _, err := ConfigFromEnv(func(string) string { return "" }, nil)
	if err != nil {
		return err
	}
	cfg.HTTPAddr, cfg.DataDir, cfg.AgentAuth, cfg.BootstrapAdminToken = "127.0.0.1:0", filepath.Join(tmp, "data"), "none", token
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv, err := New(ctx, logger, cfg)
	if err != nil {
		return err
	}
	base := "http://" + srv.Addr().String()
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Run(ctx) }()
	defer func() { cancel(); <-srvDone }()

	agentLog, err := os.Create(filepath.Join(tmp, "agent.log"))
	if err != nil {
		return err
	}
	defer agentLog.Close()
	agent := exec.CommandContext(ctx, agentBin)
	agent.Env = append(os.Environ(),
		"KICI_ORCHESTRATOR_URL=ws://"+srv.Addr().String()+"/ws",
		"KICI_AGENT_ID=demo-agent",
		"KICI_AGENT_WORKDIR="+filepath.Join(tmp, "agent"),
		"KICI_LABELS=",
	)
	agent.Stdout, agent.Stderr = agentLog, agentLog
	if err := agent.Start(); err != nil {
		return fmt.Errorf("start kici-agent: %w", err)
	}
	defer func() { _ = agent.Process.Signal(os.Interrupt); _ = agent.Wait() }()

	c := demoClient{base: base, token: token}
	if err := c.do(ctx, "POST", "/api/v1/sources", apiv1.Source{Name: "hello", Kind: "local", Path: repo}, nil); err != nil {
		return err
	}
	var tr apiv1.TriggerResponse
	if err := c.do(ctx, "POST", "/api/v1/sources/hello/trigger", apiv1.TriggerRequest{Event: "push", Ref: "main"}, &tr); err != nil {
		return err
	}
	if len(tr.Runs) == 0 {
		return fmt.Errorf("the push started no run: %+v", tr.Decisions)
	}
	runID := tr.Runs[0].ID
	fmt.Fprintf(stdout, "run %s started (workflow %s); following its logs\n", runID, tr.Runs[0].Workflow)
	status, err := c.follow(ctx, stdout, runID)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s %s\n", runID, status)
	if status != "success" {
		return fmt.Errorf("run %s ended %s (orchestrator log: %s)", runID, status, logFile.Name())
	}
	return nil
}

// makeDemoRepo copies the example into a fresh git repository with one
// commit on main.
func makeDemoRepo(ctx context.Context, from, to string) error {
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("copy example %s: %w", from, err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=kici demo", "-c", "user.email=demo@kici.invalid", "commit", "-q", "-m", "example"},
	} {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", to}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", args[0], err, out)
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// demoClient is the few API calls the demo makes.
type demoClient struct {
	base, token string
}

func (c demoClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e apiv1.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%s %s: %s: %s %s", method, path, resp.Status, e.Error, strings.Join(e.Details, "; "))
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// follow prints a run's live events until it ends and returns its status.
func (c demoClient) follow(ctx context.Context, w io.Writer, runID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/runs/"+runID+"/events", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	status := ""
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev apiv1.Event
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		switch ev.Kind {
		case "log":
			for _, l := range ev.Lines {
				fmt.Fprintf(w, "[%s] %s\n", ev.Job, l.Text)
			}
		case "job":
			fmt.Fprintf(w, "job %s: %s %s\n", ev.Job, ev.Status, ev.Error)
		case "run":
			status = ev.Status
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return status, fmt.Errorf("follow run %s: %w", runID, err)
	}
	switch status {
	case "success", "failure", "cancelled":
		return status, nil
	}
	return status, fmt.Errorf("run %s did not end (last status %q)", runID, status)
}
