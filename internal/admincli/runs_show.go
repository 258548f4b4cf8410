package admincli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newRunsShowCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a run with its jobs, steps, exit codes and errors",
		Example: `  kici-admin runs show r-102
  kici-admin runs show r-102 -o json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			run, err := c.getRun(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("show run %q: %w", args[0], err)
			}
			if output == formatJSON {
				return writeJSON(cmd.OutOrStdout(), run)
			}
			printRun(cmd.OutOrStdout(), a.env.now(), run)
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printRun writes a run's header, then its jobs with their steps below
// each, then the errors in full.
func printRun(w io.Writer, now time.Time, r apiv1.Run) {
	tw := newTable(w)
	tw.row("run:", r.ID)
	tw.row("source:", dash(r.Source))
	tw.row("workflow:", dash(r.Workflow))
	tw.row("event:", dash(eventKind(r.Event)))
	if r.Actor != "" {
		tw.row("actor:", r.Actor)
	}
	ref := dash(r.Ref)
	if r.SHA != "" {
		ref += " @ " + shortSHA(r.SHA)
	}
	tw.row("ref:", ref)
	tw.row("status:", r.Status)
	if r.Error != "" {
		tw.row("error:", r.Error)
	}
	if r.ParentRun != "" {
		tw.row("rerun of:", r.ParentRun)
	}
	tw.row("created:", ago(now, r.CreatedAt))
	tw.row("started:", agoPtr(now, r.StartedAt))
	tw.row("finished:", agoPtr(now, r.FinishedAt))
	tw.row("duration:", elapsed(now, r.StartedAt, r.FinishedAt))
	tw.flush()
	if len(r.Jobs) == 0 {
		fmt.Fprintln(w, "\nno jobs")
		return
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	tw.row("JOB / STEP", "STATUS", "EXIT", "RUNS ON", "AGENT", "DURATION")
	for _, j := range r.Jobs {
		status := j.Status
		if j.Attempt > 1 {
			status += fmt.Sprintf(" (attempt %d)", j.Attempt)
		}
		tw.row(j.Name, status, "", list(j.RunsOn), dash(j.AgentID), elapsed(now, j.StartedAt, j.FinishedAt))
		for _, s := range j.Steps {
			exit := ""
			if s.ExitCode != nil {
				exit = strconv.Itoa(*s.ExitCode)
			}
			took := ""
			if s.StartedAt != nil {
				took = elapsed(now, s.StartedAt, s.FinishedAt)
			}
			tw.row(fmt.Sprintf("  %d. %s", s.Index, s.Name), s.Status, exit, "", "", took)
		}
	}
	tw.flush()
	printAttempts(w, r.Jobs)
	var errs []string
	for _, j := range r.Jobs {
		if j.Error != "" {
			errs = append(errs, fmt.Sprintf("%s: %s", j.Name, j.Error))
		}
		for _, s := range j.Steps {
			if s.Error != "" {
				errs = append(errs, fmt.Sprintf("%s, step %d %q: %s", j.Name, s.Index, s.Name, s.Error))
			}
		}
	}
	if len(errs) > 0 {
		fmt.Fprintln(w, "\nerrors:")
		for _, e := range errs {
			fmt.Fprintf(w, "  %s\n", escapeControls(e))
		}
	}
}

// eventKind is the kind of a run's event: the "kind" of an event object,
// or the event itself when it is a plain string.
func eventKind(raw json.RawMessage) string {
	var ev struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(raw, &ev) == nil && ev.Kind != "" {
		return ev.Kind
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// printAttempts lists how the earlier attempts of the run's retried jobs
// ended, when there are any.
func printAttempts(w io.Writer, jobs []apiv1.Job) {
	var lines []string
	for _, j := range jobs {
		for _, a := range j.PreviousAttempts {
			on := ""
			if a.AgentID != "" {
				on = " on " + a.AgentID
			}
			lines = append(lines, fmt.Sprintf("%s: attempt %d ended (%s)%s: %s", j.Name, a.Attempt, a.Cause, on, a.Error))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nretried attempts:")
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", escapeControls(l))
	}
}
