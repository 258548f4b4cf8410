package authorcli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
	"github.com/spf13/cobra"
)

// errInterrupted is the cancel cause of a job stopped by Ctrl-C (SIGINT) or
// SIGTERM. It is a runner.ErrCancelled, so the job ends "cancelled".
var errInterrupted = fmt.Errorf("%w: interrupted", runner.ErrCancelled)

// runFlags are the options of `kici run`.
type runFlags struct {
	eventFlags
	event     string
	jobs      []string
	env       []string
	secrets   []string
	keepGoing bool
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [DIR] [WORKFLOW]",
		Short: "Run a workflow's jobs on this machine, in the checkout itself",
		Long: `Compile the workflows under DIR and run the jobs of WORKFLOW (which may be
left out when DIR has only one workflow) on this machine, as an agent would,
for the event the flags describe (default: a push to main).

With a single argument, a directory that holds .kici/workflows is DIR;
anything else names a WORKFLOW of the current directory.

Steps run in DIR itself, not in a fresh checkout: they see uncommitted
changes, and what they write stays. Jobs run one at a time, in dependency
order (file order among jobs that are ready together). As on the
orchestrator, a job whose needs conditions are not met, or whose "if" is
false, is skipped. By default the run stops at the first failed job; with
--keep-going it goes on with every job the orchestrator would still run.

--job runs only the named jobs; a selected job whose needs are not selected
runs anyway, as if they had succeeded. A job receives only the secrets it
declares; their values, and those of every --secret, are masked as "***".

Output lines are prefixed with "[JOB]". Ctrl-C cancels the running job
(its processes get SIGTERM, then SIGKILL after 10s or a second Ctrl-C) and
ends the run. Exits 0 when every job that ran succeeded (a failure under
continue-on-error counts as success), 1 otherwise.`,
		Example: `  kici run
  kici run . ci --job test
  kici run ci --event tag --ref v1.2.0
  kici run ops --event manual --input target=staging --secret DEPLOY_TOKEN
  kici run --keep-going --env GOFLAGS=-mod=mod`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCommand(cmd, args, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.event, "event", trigger.KindPush, "the event to run for: "+strings.Join(eventKinds, ", "))
	addEventFlags(fl, &f.eventFlags)
	fl.StringArrayVar(&f.jobs, "job", nil, "run only this job (repeat); a matrix job's name selects every combination")
	fl.StringArrayVar(&f.env, "env", nil, "a variable for every step as NAME=VALUE (repeat); it wins over the workflow's, job's and step's env")
	fl.StringArrayVar(&f.secrets, "secret", nil, "a secret as NAME=VALUE, or NAME to take it from $NAME (repeat); only jobs that declare it receive it")
	fl.BoolVar(&f.keepGoing, "keep-going", false, "after a failed job, go on with the jobs that do not depend on it (default: stop)")
	return cmd
}

// runCommand is `kici run`: everything that can be checked is checked
// before the first job starts.
func runCommand(cmd *cobra.Command, args []string, f *runFlags) error {
	stdout := &lockedWriter{w: cmd.OutOrStdout()}
	stderr := &lockedWriter{w: cmd.ErrOrStderr()}
	dir, name := runArgs(args)
	ev, err := buildEvent(f.event, &f.eventFlags)
	if err != nil {
		return err
	}
	env, err := parseEnvFlags(f.env)
	if err != nil {
		return err
	}
	secrets, err := parseSecretFlags(f.secrets, os.LookupEnv)
	if err != nil {
		return err
	}
	plan, err := workflow.CompileDir(dir)
	if err != nil {
		return printCompileError(cmd, err)
	}
	wf, err := pickWorkflow(plan, name, dir)
	if err != nil {
		return err
	}
	selected, err := selectJobs(wf, f.jobs)
	if err != nil {
		return err
	}
	inputs, warning, err := runInputs(wf, ev)
	if err != nil {
		return err
	}
	if warning != "" {
		fmt.Fprintf(stderr, "kici: warning: %s\n", warning)
	}
	for _, s := range unusedSecrets(wf, selected, secrets) {
		fmt.Fprintf(stderr, "kici: warning: --secret %s: no job that runs declares it\n", s)
	}

	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("directory %q: %w", dir, err)
	}
	work, err := os.MkdirTemp("", "kici-run-")
	if err != nil {
		return fmt.Errorf("create work directory: %w", err)
	}
	defer os.RemoveAll(work)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := runner.New(logger, runner.Config{WorkDir: work})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	kill := make(chan struct{})
	stop := onInterrupt(cancel, kill, stderr)
	defer stop()

	lr := newLocalRun(localRunConfig{
		Workflow: wf, Dir: abs, Event: ev, Inputs: inputs, Selected: selected,
		Env: env, Secrets: secrets, KeepGoing: f.keepGoing,
		Runner: r, Kill: kill, Stdout: stdout, Stderr: stderr,
	})
	lr.printHeader()
	lr.run(ctx)
	lr.printSummary()
	if !lr.succeeded() {
		return errReported
	}
	return nil
}

// runArgs splits the arguments into DIR and WORKFLOW. A single argument is
// DIR when it holds workflows, or when it is a directory and the current
// directory holds none (so that the compile error names it); otherwise it
// names a workflow of the current directory.
func runArgs(args []string) (dir, name string) {
	switch len(args) {
	case 0:
		return ".", ""
	case 1:
		if hasWorkflows(args[0]) || !hasWorkflows(".") && isDir(args[0]) {
			return args[0], ""
		}
		return ".", args[0]
	}
	return args[0], args[1]
}

func hasWorkflows(dir string) bool {
	return isDir(filepath.Join(dir, filepath.FromSlash(workflow.WorkflowsDir)))
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// pickWorkflow finds the workflow called name, or the only one when name
// is empty.
func pickWorkflow(plan *workflow.Plan, name, dir string) (*workflow.Workflow, error) {
	names := make([]string, len(plan.Workflows))
	for i, wf := range plan.Workflows {
		if wf.Name == name || name == "" && len(plan.Workflows) == 1 {
			return &plan.Workflows[i], nil
		}
		names[i] = wf.Name
	}
	if name == "" {
		return nil, usageError{fmt.Errorf("%s has %d workflows; name one: %s", dir, len(names), strings.Join(names, ", "))}
	}
	return nil, usageError{fmt.Errorf("no workflow %q in %s; workflows: %s", name, dir, strings.Join(names, ", "))}
}

// selectJobs turns the --job names into the set of expanded job names to
// run; nil means every job. A matrix job's base name selects every
// combination.
func selectJobs(wf *workflow.Workflow, names []string) (map[string]bool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	sel := map[string]bool{}
	for _, n := range names {
		found := false
		for _, j := range wf.Jobs {
			if j.Name == n || j.Base == n {
				sel[j.Name], found = true, true
			}
		}
		if !found {
			var bases []string
			for _, j := range wf.Jobs {
				if !slices.Contains(bases, j.Base) {
					bases = append(bases, j.Base)
				}
			}
			return nil, usageError{fmt.Errorf("--job %q: workflow %s has no such job; jobs: %s", n, wf.Name, strings.Join(bases, ", "))}
		}
	}
	return sel, nil
}

// runInputs resolves the inputs of the run the way the orchestrator would
// and says, in warning, when the workflow's triggers would not start it for
// this event (it runs anyway). A manual event whose inputs the manual
// trigger refuses is a usage error.
func runInputs(wf *workflow.Workflow, ev trigger.Event) (inputs map[string]string, warning string, err error) {
	d := trigger.Match(wf, ev)
	if d.Matched {
		if d.Inputs != nil {
			return d.Inputs, "", nil
		}
		return wf.DefaultInputs(), "", nil
	}
	for _, c := range d.Checks {
		if c.Trigger == workflow.TriggerManual && strings.HasPrefix(c.Field, "inputs.") && !c.OK {
			return nil, "", usageError{fmt.Errorf("workflow %s: %s", wf.Name, d.Reason)}
		}
	}
	return wf.DefaultInputs(), fmt.Sprintf("workflow %s would not run on this event (%s); running it anyway", wf.Name, d.Reason), nil
}

// envNameRE is what the compiler accepts as a variable name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseEnvFlags reads the --env flags.
func parseEnvFlags(list []string) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok || !envNameRE.MatchString(k):
			return nil, usageError{fmt.Errorf("--env %q: want NAME=VALUE, NAME of letters, digits and _", kv)}
		case strings.HasPrefix(strings.ToUpper(k), "KICI_"):
			return nil, usageError{fmt.Errorf("--env %q: the KICI_ prefix is reserved for variables kici sets", kv)}
		}
		env[k] = v
	}
	return env, nil
}

// secretNameRE is what the compiler accepts as a secret name.
var secretNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// parseSecretFlags reads the --secret flags: NAME=VALUE, or NAME alone for
// the value of the environment variable NAME (looked up with lookup).
func parseSecretFlags(list []string, lookup func(string) (string, bool)) (map[string]string, error) {
	secrets := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !secretNameRE.MatchString(k) {
			return nil, usageError{fmt.Errorf("--secret %q: want NAME=VALUE or NAME, NAME of upper-case letters, digits and _", kv)}
		}
		if !ok {
			if v, ok = lookup(k); !ok {
				return nil, usageError{fmt.Errorf("--secret %s: no value given and $%s is not set", k, k)}
			}
		}
		secrets[k] = v
	}
	return secrets, nil
}

// unusedSecrets lists, sorted, the given secrets that no job that runs
// declares.
func unusedSecrets(wf *workflow.Workflow, selected map[string]bool, secrets map[string]string) []string {
	var out []string
	for name := range secrets {
		used := slices.ContainsFunc(wf.Jobs, func(j workflow.Job) bool {
			return (selected == nil || selected[j.Name]) && slices.Contains(j.Secrets, name)
		})
		if !used {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// onInterrupt cancels the run with errInterrupted on the first SIGINT or
// SIGTERM and closes kill on the second. stop ends the watch.
func onInterrupt(cancel context.CancelCauseFunc, kill chan<- struct{}, w io.Writer) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-sigs:
			}
			if n == 1 {
				fmt.Fprintln(w, "kici: interrupted: cancelling the running job (interrupt again to kill it at once)")
				cancel(errInterrupted)
				continue
			}
			fmt.Fprintln(w, "kici: interrupted again: killing the running job")
			close(kill)
			return
		}
	})
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}

// lockedWriter serialises writes to w: job output, warnings and the
// interrupt handler's notes may come from different goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// errText is err's message, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
