package admincli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Exit statuses of kici-admin, as CONTRACT.md gives them.
const (
	exitOK     = 0
	exitFailed = 1 // the operation failed, or a followed run did not succeed
	exitUsage  = 2 // bad command line, flags or configuration
)

// The environment variables kici-admin reads, and their defaults.
const (
	envURL         = "KICI_ADMIN_URL"
	envToken       = "KICI_ADMIN_TOKEN"
	defaultURL     = "http://127.0.0.1:4000"
	defaultTimeout = 30 * time.Second
)

// How often runs logs -f asks for new lines, and how long a follower
// waits before opening a run's event stream again after it broke off.
const (
	defaultPollInterval   = 200 * time.Millisecond
	defaultReconnectDelay = time.Second
)

// usageError marks a mistake in the command line or the configuration:
// exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// errSilent is a failure the command has already shown on its output (a
// run that ended other than success): exit status 1 and no message.
var errSilent = errors.New("failure already reported")

// detailer is an error that has more to say than its one line: each
// detail is printed indented below it.
type detailer interface {
	details() []string
}

// env is what a kici-admin invocation gets from the process. Tests
// replace the clock and the sleeps.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// now is the clock that relative times are measured against.
	now func() time.Time
	// sleep waits d or until ctx ends, whichever is first.
	sleep func(ctx context.Context, d time.Duration) error
	// pollInterval is the pause between two empty reads of runs logs -f.
	pollInterval time.Duration
	// reconnectDelay is the pause before a follower opens a broken event
	// stream again.
	reconnectDelay time.Duration
}

// globalFlags are the options every command takes.
type globalFlags struct {
	// url is the orchestrator's base URL; empty means $KICI_ADMIN_URL,
	// then defaultURL.
	url string
	// token is the API token; empty means $KICI_ADMIN_TOKEN.
	token string
	// timeout bounds each API request; 0 means no limit. Following a run
	// is not one request and is not bounded.
	timeout time.Duration
}

// app is what every command's RunE works with: the process environment
// and the global flags, once parsed.
type app struct {
	env    *env
	global globalFlags
}

// Main runs kici-admin with args (without the program name) and returns
// its exit status. getenv is os.Getenv in the real binary.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return run(context.Background(), args, &env{
		stdin:          stdin,
		stdout:         stdout,
		stderr:         stderr,
		getenv:         getenv,
		now:            time.Now,
		sleep:          sleepCtx,
		pollInterval:   defaultPollInterval,
		reconnectDelay: defaultReconnectDelay,
	})
}

// run is Main with the context and the environment given.
func run(ctx context.Context, args []string, e *env) int {
	a := &app{env: e}
	root := newRoot(a)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return report(e.stderr, cmd, err)
}

// report prints err, if any, and turns it into an exit status.
func report(stderr io.Writer, cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, errSilent) {
		return exitFailed
	}
	fmt.Fprintf(stderr, "kici-admin: %v\n", err)
	var d detailer
	if errors.As(err, &d) {
		for _, line := range d.details() {
			fmt.Fprintf(stderr, "  %s\n", line)
		}
	}
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		if cmd != nil {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return exitUsage
	}
	return exitFailed
}

// isCobraUsage recognises the command-line errors cobra makes itself and
// does not type: unknown commands and required flags.
func isCobraUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "required flag")
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "kici-admin",
		Short: "Operate a kici orchestrator: sources, runs, logs, queue, agents and auto-scaler",
		Long: `kici-admin is the operator's client of a kici orchestrator's HTTP API.

It talks to $` + envURL + ` (default ` + defaultURL + `) and sends
$` + envToken + ` as a Bearer token; --url and --token override them.

Listings print a table, or the API's JSON with -o json. Exit status: 0 on
success, 1 when the operation failed (or a followed run did not end in
success), 2 on a bad command line.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(a.env.stdin)
	root.SetOut(a.env.stdout)
	root.SetErr(a.env.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	pf.StringVarP(&a.global.url, "url", "u", "", "orchestrator base `URL` (default $"+envURL+", else "+defaultURL+")")
	pf.StringVarP(&a.global.token, "token", "t", "", "`TOKEN` sent to the API as a Bearer token (default $"+envToken+"; prefer the variable, flags show in ps)")
	pf.DurationVar(&a.global.timeout, "timeout", defaultTimeout, "time limit of each API request, 0 for none; following a run has no limit")

	root.AddCommand(
		group("sources", []string{"source"}, "Register, list and remove the repositories kici builds",
			newSourcesAddCmd(a), newSourcesListCmd(a), newSourcesRemoveCmd(a), newSourcesDeliveriesCmd(a), newSourcesRedeliverCmd(a)),
		newTriggerCmd(a),
		newSchedulesGroup(a),
		group("runs", []string{"run"}, "List, inspect, follow, cancel, rerun and approve runs",
			newRunsListCmd(a), newRunsShowCmd(a), newRunsLogsCmd(a), newRunsWatchCmd(a),
			newRunsCancelCmd(a), newRunsRerunCmd(a), newRunsApproveCmd(a), newRunsArtifactsCmd(a)),
		group("queue", nil, "Show the jobs waiting for an agent", newQueueListCmd(a)),
		group("agents", []string{"agent"}, "Show the connected agents; drain and undrain them",
			newAgentsListCmd(a), newAgentsDrainCmd(a), newAgentsUndrainCmd(a)),
		group("agent-tokens", []string{"agent-token"}, "Create, list and revoke the tokens agents connect with",
			newAgentTokensCreateCmd(a), newAgentTokensListCmd(a), newAgentTokensRevokeCmd(a)),
		group("tokens", []string{"token"}, "Create, list and revoke admin tokens (owner, admin, auditor)",
			newTokensCreateCmd(a), newTokensListCmd(a), newTokensRevokeCmd(a)),
		group("secrets", []string{"secret"}, "Set, list and delete the secrets jobs receive; rotate their key",
			newSecretsSetCmd(a), newSecretsListCmd(a), newSecretsDeleteCmd(a), newSecretsRotateKeyCmd(a)),
		newEnvironmentsGroup(a),
		group("audit", nil, "Show the audit log of changes and refused requests", newAuditListCmd(a)),
		group("scaler", []string{"scalers"}, "Show and reload the auto-scaler; find and stop its orphaned compute",
			newScalerStatusCmd(a), newScalerReloadCmd(a), newScalerRetryCmd(a),
			group("orphans", []string{"orphan"}, "List the scalers' live compute and stop what nothing tracks",
				newScalerOrphansListCmd(a), newScalerOrphansStopCmd(a))),
		group("peers", []string{"peer"}, "Show the nodes of a cluster and which one leads; forget departed ones, revoke workers; let workers join",
			newPeersListCmd(a), newPeersForgetCmd(a), newPeersRevokeCmd(a),
			group("join-token", []string{"join-tokens"}, "Create, list and revoke the single-use tokens workers join the cluster with",
				newPeersJoinTokenCreateCmd(a), newPeersJoinTokenListCmd(a), newPeersJoinTokenRevokeCmd(a))),
		newDiagnoseCmd(a),
	)
	return root
}

// group is a command that only holds subcommands: alone it prints its
// help, and with an unknown subcommand it is a usage error (cobra checks
// that only for the root).
func group(name string, aliases []string, short string, children ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:     name,
		Aliases: aliases,
		Short:   short,
		// SuggestionsFor reads this; cobra sets its default only on the root.
		SuggestionsMinimumDistance: 2,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			err := usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				err = usagef("unknown command %q for %q; did you mean %q?", args[0], cmd.CommandPath(), s[0])
			}
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(children...)
	return cmd
}

// exactArgs accepts exactly the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(args) < len(names) {
			return usagef("missing %s", strings.Join(names[len(args):], " "))
		}
		return usagef("too many arguments: want %s, got %q", strings.Join(names, " "), args)
	}
}

// noArgs accepts no positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	return nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
