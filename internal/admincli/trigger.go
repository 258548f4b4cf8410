package admincli

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// The events a trigger may simulate.
var triggerEvents = []string{"push", "tag", "manual"}

// maxChangedFiles is the orchestrator's bound on a push's changed files.
const maxChangedFiles = 3000

// triggerFlags are the options of `kici-admin trigger`.
type triggerFlags struct {
	event     string
	ref       string
	sha       string
	inputs    []string
	workflows []string
	changed   []string
	wait      bool
	output    string
}

// noMatchError says a trigger started no run; its details are each
// workflow's reason.
type noMatchError struct {
	source, event string
	decisions     []apiv1.Decision
	// problems are the commit's invalid workflow files.
	problems []string
}

func (e *noMatchError) Error() string {
	return fmt.Sprintf("trigger %q: no workflow matched the %s event", e.source, e.event)
}

func (e *noMatchError) details() []string {
	var lines []string
	for _, d := range e.decisions {
		lines = append(lines, d.Workflow+": "+d.Reason)
	}
	for _, p := range e.problems {
		lines = append(lines, "invalid, not run: "+escapeControls(p))
	}
	return lines
}

// triggerOutput is the JSON of a trigger, exactly as CONTRACT.md gives it.
type triggerOutput struct {
	Runs []apiv1.RunRef `json:"runs"`
}

func newTriggerCmd(a *app) *cobra.Command {
	var f triggerFlags
	cmd := &cobra.Command{
		Use:   "trigger SOURCE [--event push|tag|manual] [--ref REF] [--sha SHA] [--workflow NAME ...] [--input NAME=VALUE ...] [--changed-file PATH ...] [--wait]",
		Short: "Start the workflows of a source that match an event",
		Long: `Ask the orchestrator to act as if SOURCE had seen an event, and print the
runs it started with, per workflow, why it matched or not. When no workflow
matches, each workflow's reason is printed and the exit status is 1.

The commit's invalid workflow files do not stop its valid ones: they are
listed after the runs, under "invalid workflows, not run:", one
FILE:LINE:COL: message each (on stderr with -o json).

The event is push unless --event says otherwise, or manual when --input is
given. An empty --ref means the source's default branch; --sha pins the
commit instead of resolving REF.

--workflow NAME (repeat) limits the trigger to the workflows of those
names; the others are not even matched. A name the commit has no workflow
of is an error that lists the workflows there, and starts nothing.

--changed-file PATH (repeat; push only) gives the files the push changed,
as repository-relative paths, so that "paths:" filters apply. Without it
the changed files are unknown and a workflow with a paths filter does not
run. At most 3000 paths.

The run records the admin token's name as its actor (kici-admin runs show).

--wait follows every started run live: status changes as "JOB: STATUS",
log lines as "JOB | TEXT" (WORKFLOW/JOB when several runs started), then
"run ID STATUS" per run. The exit status is 0 only if every run ended in
success. With -o json, stdout holds only the JSON and the progress goes to
stderr.`,
		Example: `  kici-admin trigger hello
  kici-admin trigger hello --ref release/1.2 --wait
  kici-admin trigger hello --event tag --ref v1.2.0 -o json
  kici-admin trigger hello --input greeting=bonjour --wait
  kici-admin trigger hello --event manual --workflow release --workflow docs
  kici-admin trigger hello --changed-file docs/a.md --changed-file src/main.go`,
		Args: exactArgs("SOURCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request(cmd)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			source := args[0]
			var resp apiv1.TriggerResponse
			if err := c.do(cmd.Context(), http.MethodPost, sourcePath(source)+"/trigger", nil, req, &resp); err != nil {
				return fmt.Errorf("trigger %q: %w", source, err)
			}
			out, progress := cmd.OutOrStdout(), cmd.OutOrStdout()
			if f.output == formatJSON {
				progress = cmd.ErrOrStderr()
				if err := writeJSON(out, triggerOutput{Runs: nonNil(resp.Runs)}); err != nil {
					return err
				}
			}
			if len(resp.Runs) == 0 {
				return &noMatchError{source: source, event: req.Event, decisions: resp.Decisions, problems: resp.Problems}
			}
			if f.output == formatTable {
				printTrigger(out, resp)
			}
			printTriggerProblems(progress, resp.Problems)
			if !f.wait {
				return nil
			}
			runs, err := a.followRuns(cmd.Context(), c, resp.Runs, progress)
			return reportOutcome(progress, runs, err)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.event, "event", "push", "event to simulate: push, tag or manual (manual when --input is given)")
	fl.StringVar(&f.ref, "ref", "", "`REF`: branch, tag or full ref (default: the source's default branch)")
	fl.StringVar(&f.sha, "sha", "", "commit `SHA` to build instead of resolving --ref")
	fl.StringArrayVar(&f.inputs, "input", nil, "a manual run's input as `NAME=VALUE` (repeat)")
	fl.StringArrayVar(&f.workflows, "workflow", nil, "start only the workflow of this `NAME` (repeat); an unknown name is an error listing the valid ones")
	fl.StringArrayVar(&f.changed, "changed-file", nil, "push: a changed file, a repository-relative `PATH` (repeat; at most 3000), so paths filters apply")
	fl.BoolVar(&f.wait, "wait", false, "follow the started runs live and exit 0 only if all succeed")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// request checks the flags and builds the trigger request.
func (f *triggerFlags) request(cmd *cobra.Command) (apiv1.TriggerRequest, error) {
	req := apiv1.TriggerRequest{Event: f.event, Ref: f.ref, SHA: f.sha, Workflows: f.workflows, ChangedFiles: f.changed}
	if err := checkOutput(f.output); err != nil {
		return req, err
	}
	if len(f.inputs) > 0 && !cmd.Flags().Changed("event") {
		req.Event = "manual"
	}
	if !slices.Contains(triggerEvents, req.Event) {
		return req, usagef("--event %q: want one of %s", req.Event, strings.Join(triggerEvents, ", "))
	}
	if len(f.inputs) > 0 && req.Event != "manual" {
		return req, usagef("--input is only for --event manual")
	}
	if len(f.changed) > 0 && req.Event != "push" {
		return req, usagef("--changed-file is only for --event push")
	}
	if len(f.changed) > maxChangedFiles {
		return req, usagef("--changed-file given %d times, at most %d", len(f.changed), maxChangedFiles)
	}
	for _, p := range f.changed {
		if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
			return req, usagef("--changed-file %q: want a repository-relative path, like src/main.go", p)
		}
	}
	for _, n := range f.workflows {
		if strings.TrimSpace(n) == "" {
			return req, usagef("--workflow %q: want a workflow name", n)
		}
	}
	for _, kv := range f.inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return req, usagef("--input %q: want NAME=VALUE", kv)
		}
		if _, dup := req.Inputs[k]; dup {
			return req, usagef("--input %q: %s given twice", kv, k)
		}
		if req.Inputs == nil {
			req.Inputs = map[string]string{}
		}
		req.Inputs[k] = v
	}
	return req, nil
}

// printTriggerProblems writes the invalid workflow files of the commit,
// which did not run while its valid workflows did: one line each, escaped
// (file names and messages come from the pushed commit).
func printTriggerProblems(w io.Writer, problems []string) {
	if len(problems) == 0 {
		return
	}
	fmt.Fprintln(w, "invalid workflows, not run:")
	for _, p := range problems {
		printLine(w, false, "  %s", p)
	}
}

// printTrigger writes one row per workflow: the run it started, or why it
// did not match. Runs the decisions do not mention get a row of their own.
func printTrigger(w io.Writer, resp apiv1.TriggerResponse) {
	tw := newTable(w)
	tw.row("WORKFLOW", "RUN", "REASON")
	shown := make([]bool, len(resp.Runs))
	for _, d := range resp.Decisions {
		run := "-"
		if d.Matched {
			for i, r := range resp.Runs {
				if !shown[i] && r.Workflow == d.Workflow {
					run, shown[i] = r.ID, true
					break
				}
			}
		}
		tw.row(d.Workflow, run, dash(d.Reason))
	}
	for i, r := range resp.Runs {
		if !shown[i] {
			tw.row(r.Workflow, r.ID, "-")
		}
	}
	tw.flush()
}
