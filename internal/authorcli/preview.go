package authorcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/trigger"
	"github.com/kici-dev/kici/internal/workflow"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// previewFlags are the options of `kici preview`.
type previewFlags struct {
	eventFlags
	githubEvent  string
	payload      string
	outputFormat string
}

// eventFlags are the flags that describe an event, shared by `kici preview`
// and `kici run`.
type eventFlags struct {
	ref     string
	sha     string
	base    string
	head    string
	action  string
	actor   string
	cron    string
	changed []string
	inputs  []string
}

// addEventFlags defines the event flags on fl.
func addEventFlags(fl *pflag.FlagSet, f *eventFlags) {
	fl.StringVar(&f.ref, "ref", "", "branch, tag or full ref (push: default main; tag: the tag; manual/schedule: default branch when empty)")
	fl.StringVar(&f.sha, "sha", "", "commit the event is about")
	fl.StringVar(&f.base, "base", "main", "pull_request: the base branch")
	fl.StringVar(&f.head, "head", "", "pull_request: the head branch")
	fl.StringVar(&f.action, "action", "opened", "pull_request: the action (opened, synchronize, ...)")
	fl.StringVar(&f.actor, "actor", "", "who caused the event")
	fl.StringVar(&f.cron, "cron", "", "schedule: the cron spec that fired")
	fl.StringArrayVar(&f.changed, "changed-file", nil, "a changed file (repeat); without any, changed files are unknown and path filters do not match")
	fl.StringArrayVar(&f.inputs, "input", nil, "manual: an input as NAME=VALUE (repeat)")
}

// previewOutput is the JSON form of a preview, as CONTRACT.md gives it.
type previewOutput struct {
	Event     trigger.Event     `json:"event"`
	Ignored   bool              `json:"ignored,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Workflows []previewWorkflow `json:"workflows,omitempty"`
}

type previewWorkflow struct {
	trigger.Decision
	// Jobs are the jobs the run would start with, by expanded name.
	Jobs []string `json:"jobs"`
	// SkippedJobs are jobs whose `if` is already false for this event.
	SkippedJobs []skippedJob `json:"skipped_jobs,omitempty"`
}

type skippedJob struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

var eventKinds = []string{trigger.KindPush, trigger.KindTag, trigger.KindPullRequest, trigger.KindManual, trigger.KindSchedule}

func newPreviewCmd() *cobra.Command {
	var f previewFlags
	cmd := &cobra.Command{
		Use:   "preview [DIR] EVENT | preview [DIR] --github-event KIND --payload FILE",
		Short: "Show which workflows and jobs an event would run, and why",
		Long: `Match an event against the workflows under DIR and print, for each
workflow, whether it would run, which trigger decided and why, and the jobs
the run would have.

EVENT is one of push, tag, pull_request, manual, schedule, described by the
flags; or give a GitHub delivery body as GitHub sends it with
--github-event KIND --payload FILE (KIND is the X-GitHub-Event header:
push, pull_request, create, workflow_dispatch, ping, ...). An event kici
ignores (ping, a branch deletion) prints "ignored" and no workflows.

A delivery's changed files come from the payload alone: a push lists them in
its commits (a new branch's too). A pull_request delivery does not list
them, nor does a new branch without commits: preview says they are unknown
(the orchestrator reads them from the source), and --changed-file gives them.

Jobs whose "if" is false for the event and the inputs (--input, else each
input's default) are listed as skipped, with the reason. Conditions on
upstream results (needs.*, success(), failure()) are evaluated as if every
upstream succeeded.`,
		Example: `  kici preview push --ref main --changed-file src/main.go
  kici preview . tag --ref v1.2.0
  kici preview pull_request --base main --head feature/x --action synchronize
  kici preview manual --input target=production
  kici preview --github-event push --payload delivery.json -o json`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, ev, err := previewEvent(cmd, args, &f)
			if err != nil {
				return err
			}
			if f.outputFormat != "text" && f.outputFormat != "json" {
				return usageError{fmt.Errorf("-o %q: want text or json", f.outputFormat)}
			}
			out := previewOutput{Event: ev.event}
			if ev.ignored != nil {
				out.Ignored, out.Reason = true, ev.ignored.Reason
			} else {
				plan, err := workflow.CompileDir(dir)
				if err != nil {
					return printCompileError(cmd, err)
				}
				out.Workflows = preview(plan, ev.event)
			}
			if f.outputFormat == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			printPreview(cmd.OutOrStdout(), out)
			return nil
		},
	}
	fl := cmd.Flags()
	addEventFlags(fl, &f.eventFlags)
	fl.StringVar(&f.githubEvent, "github-event", "", "read a GitHub delivery of this kind (the X-GitHub-Event header) from --payload")
	fl.StringVar(&f.payload, "payload", "", "file holding the GitHub delivery body (- for stdin)")
	fl.StringVarP(&f.outputFormat, "output", "o", "text", "output format: text or json")
	return cmd
}

type builtEvent struct {
	event   trigger.Event
	ignored *trigger.IgnoredError
}

// previewEvent works out DIR and the event from the arguments and flags.
func previewEvent(cmd *cobra.Command, args []string, f *previewFlags) (string, builtEvent, error) {
	if f.githubEvent != "" {
		if len(args) > 1 {
			return "", builtEvent{}, usageError{errors.New("with --github-event, give at most DIR")}
		}
		if f.payload == "" {
			return "", builtEvent{}, usageError{errors.New("--github-event needs --payload FILE")}
		}
		body, err := readPayload(cmd.InOrStdin(), f.payload)
		if err != nil {
			return "", builtEvent{}, err
		}
		ev, err := trigger.NormalizeGitHub(f.githubEvent, body)
		var ignored *trigger.IgnoredError
		if errors.As(err, &ignored) {
			ev.Kind, ev.Provider = f.githubEvent, trigger.ProviderGitHub
			return dirArg(args), builtEvent{event: ev, ignored: ignored}, nil
		}
		if err != nil {
			return "", builtEvent{}, fmt.Errorf("read %s: %w", f.payload, err)
		}
		if len(f.changed) > 0 {
			ev.SetChangedFiles(f.changed)
		} else if !ev.ChangedFilesKnown && ev.ChangedFilesWarning == "" {
			ev.ChangedFilesWarning = payloadUnknownFiles(ev)
		}
		return dirArg(args), builtEvent{event: ev}, nil
	}
	if f.payload != "" {
		return "", builtEvent{}, usageError{errors.New("--payload needs --github-event KIND")}
	}
	if len(args) == 0 {
		return "", builtEvent{}, usageError{fmt.Errorf("missing EVENT: one of %s", strings.Join(eventKinds, ", "))}
	}
	kind := args[len(args)-1]
	dir := "."
	if len(args) == 2 {
		dir = args[0]
	}
	ev, err := buildEvent(kind, &f.eventFlags)
	if err != nil {
		return "", builtEvent{}, err
	}
	return dir, builtEvent{event: ev}, nil
}

// payloadUnknownFiles says why a delivery's payload alone does not tell
// its changed files, which the orchestrator would then ask the source for.
func payloadUnknownFiles(ev trigger.Event) string {
	const hint = "; give --changed-file to preview a path filter"
	switch {
	case ev.Kind == trigger.KindPullRequest:
		return "a pull_request delivery does not list them: the orchestrator diffs head against its merge base with base" + hint
	case ev.IsNewBranch():
		return "the new branch lists no commits: the orchestrator diffs it against its merge base with the default branch" + hint
	case ev.Kind == trigger.KindPush:
		return "the delivery lists 2048 commits, maybe not all: the orchestrator diffs before and after" + hint
	}
	return ""
}

// buildEvent builds the event of kind that the event flags describe, as
// `kici preview` and `kici run` take it. Its errors are usage errors.
func buildEvent(kind string, f *eventFlags) (trigger.Event, error) {
	var ev trigger.Event
	switch kind {
	case trigger.KindPush:
		ref := f.ref
		if ref == "" {
			ref = "main"
		}
		ev = trigger.PushEvent(ref, f.sha)
	case trigger.KindTag:
		if f.ref == "" {
			return trigger.Event{}, usageError{errors.New("tag: --ref TAG is required")}
		}
		ev = trigger.TagEvent(strings.TrimPrefix(f.ref, "refs/tags/"), f.sha)
	case trigger.KindPullRequest:
		ev = trigger.PullRequestEvent(f.base, f.head, f.action)
		ev.SHA = f.sha
	case trigger.KindManual:
		inputs := map[string]string{}
		for _, kv := range f.inputs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return trigger.Event{}, usageError{fmt.Errorf("--input %q: want NAME=VALUE", kv)}
			}
			inputs[k] = v
		}
		ev = trigger.ManualEvent(f.ref, inputs)
		ev.SHA = f.sha
	case trigger.KindSchedule:
		if f.cron == "" {
			return trigger.Event{}, usageError{errors.New("schedule: --cron SPEC is required")}
		}
		ev = trigger.ScheduleEvent(f.cron, f.ref, time.Time{})
		ev.SHA = f.sha
	default:
		return trigger.Event{}, usageError{fmt.Errorf("unknown event %q: want one of %s", kind, strings.Join(eventKinds, ", "))}
	}
	if len(f.inputs) > 0 && kind != trigger.KindManual {
		return trigger.Event{}, usageError{errors.New("--input is only for manual events")}
	}
	ev.Actor = f.actor
	if len(f.changed) > 0 {
		ev.ChangedFiles = sortedUnique(f.changed)
		ev.ChangedFilesKnown = true
	}
	if err := ev.Validate(); err != nil {
		return trigger.Event{}, usageError{err}
	}
	return ev, nil
}

func readPayload(stdin io.Reader, name string) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	body, err := io.ReadAll(io.LimitReader(r, trigger.MaxBodySize+1))
	if err != nil {
		return nil, fmt.Errorf("read payload %s: %w", name, err)
	}
	return body, nil
}

func sortedUnique(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	// Small lists: insertion sort keeps this dependency-free and obvious.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// preview matches the event and, for each matched workflow, lists the jobs
// its run would hold.
func preview(plan *workflow.Plan, ev trigger.Event) []previewWorkflow {
	decisions := trigger.MatchAll(plan, ev)
	out := make([]previewWorkflow, len(decisions))
	for i, d := range decisions {
		pw := previewWorkflow{Decision: d, Jobs: []string{}}
		if d.Matched {
			wf := &plan.Workflows[i]
			inputs := d.Inputs
			if inputs == nil {
				inputs = wf.DefaultInputs()
			}
			skipped := map[string]bool{}
			for _, j := range wf.Jobs {
				if reason := skipReason(j, ev, inputs, skipped); reason != "" {
					skipped[j.Name] = true
					pw.SkippedJobs = append(pw.SkippedJobs, skippedJob{Name: j.Name, Reason: reason})
					continue
				}
				pw.Jobs = append(pw.Jobs, j.Name)
			}
		}
		out[i] = pw
	}
	return out
}

// skipReason says why a job would be skipped for this event, assuming
// every upstream that runs succeeds; "" when it would run.
func skipReason(j workflow.Job, ev trigger.Event, inputs map[string]string, skipped map[string]bool) string {
	needs := map[string]workflow.StatusVars{}
	for _, n := range j.Needs {
		status := workflow.NeedSuccess
		if skipped[n.Job] {
			status = workflow.NeedSkipped
		}
		ok := false
		for _, on := range n.On {
			ok = ok || on == status
		}
		if !ok {
			return fmt.Sprintf("needs %s, which would end %s", n.Job, status)
		}
		base := n.Job
		if i := strings.Index(base, " ("); i >= 0 {
			base = base[:i]
		}
		needs[base] = workflow.StatusVars{Status: status}
	}
	if j.If == "" {
		return ""
	}
	run, err := workflow.EvalIf(j.If, workflow.IfContext{
		Event: ev.Vars(), Env: j.Env, Matrix: j.Matrix, Inputs: inputs,
		Needs: needs, Job: workflow.StatusVars{Status: workflow.NeedSuccess},
	})
	if err != nil {
		return err.Error()
	}
	if !run {
		return fmt.Sprintf("if: %s is false", j.If)
	}
	return ""
}

func printPreview(w io.Writer, out previewOutput) {
	ev := out.Event
	fmt.Fprintf(w, "event: %s", ev.Kind)
	if ev.Ref != "" {
		fmt.Fprintf(w, " %s", ev.Ref)
	}
	if ev.Action != "" {
		fmt.Fprintf(w, " (%s)", ev.Action)
	}
	if ev.ChangedFilesKnown {
		fmt.Fprintf(w, ", %d changed file(s)", len(ev.ChangedFiles))
	}
	fmt.Fprintln(w)
	if !ev.ChangedFilesKnown && ev.ChangedFilesWarning != "" {
		fmt.Fprintf(w, "changed files unknown: %s\n", ev.ChangedFilesWarning)
	}
	if out.Ignored {
		fmt.Fprintf(w, "ignored: %s\n", out.Reason)
		return
	}
	for _, wf := range out.Workflows {
		verdict := "does not run"
		if wf.Matched {
			verdict = "runs"
		}
		fmt.Fprintf(w, "\n%s (%s): %s\n  why: %s\n", wf.Workflow, wf.File, verdict, wf.Reason)
		for _, j := range wf.Jobs {
			fmt.Fprintf(w, "  job %s\n", j)
		}
		for _, j := range wf.SkippedJobs {
			fmt.Fprintf(w, "  job %s: skipped (%s)\n", j.Name, j.Reason)
		}
	}
}
