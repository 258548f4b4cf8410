package admincli

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// schedulesPath is the schedule listing of the API.
func schedulesPath() string { return "/api/v1/schedules" }

// schedulesLong is the help of the schedules group.
const schedulesLong = `Show the schedule triggers (on: schedule, cron specs in UTC) of every
source's workflows at its default branch head: when each fires next and the
run its last tick started.

The list is the answering orchestrator's cache of the sources' workflows,
read again after each push and every KICI_SCHEDULE_REFRESH_MS (default five
minutes). A tick missed while no orchestrator ran is not replayed.`

// newSchedulesGroup is the schedules command and its subcommands.
func newSchedulesGroup(a *app) *cobra.Command {
	g := group("schedules", []string{"schedule"}, "Show the cron schedules of the sources' workflows, their next tick and last run",
		newSchedulesListCmd(a))
	g.Long = schedulesLong
	return g
}

func newSchedulesListCmd(a *app) *cobra.Command {
	var output, source string
	cmd := &cobra.Command{
		Use:     "list [--source NAME]",
		Aliases: []string{"ls"},
		Short:   "List every schedule trigger with its next tick (UTC) and last run",
		Long: `List every schedule trigger of the workflows at each source's default
branch head, sorted by source, workflow and cron spec: the next tick, in UTC
and from now, and the last run a tick of the workflow started (its tick, run
and status; "deleted" when the run is gone). A spec that never fires again
(30 February) shows "never".

Below the table, "problems:" lists the sources whose workflows could not be
read at the last refresh, with the reason (each invalid file as
FILE:LINE:COL: message); such a source keeps the schedules of its last
readable workflows. The last line says when the orchestrator read the
workflows: this is its cache, refreshed after each push and every
KICI_SCHEDULE_REFRESH_MS.`,
		Example: `  kici-admin schedules list
  kici-admin schedules list --source app
  kici-admin schedules list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var query url.Values
			if source != "" {
				query = url.Values{"source": {source}}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var sl apiv1.ScheduleList
			if err := c.do(cmd.Context(), http.MethodGet, schedulesPath(), query, nil, &sl); err != nil {
				return fmt.Errorf("list schedules: %w", err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				sl.Schedules = nonNil(sl.Schedules)
				return writeJSON(out, sl)
			}
			return printSchedules(out, a.env.now(), source, sl)
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "only the schedules and problems of source `NAME`")
	addOutputFlag(cmd, &output)
	return cmd
}

// printSchedules writes the schedules as a table (or a line saying there
// are none), the problems below it, and when the list was read.
func printSchedules(w io.Writer, now time.Time, source string, sl apiv1.ScheduleList) error {
	switch {
	case len(sl.Schedules) > 0:
		tw := newTable(w)
		tw.row("SOURCE", "WORKFLOW", "CRON", "NEXT TICK", "LAST RUN")
		for _, s := range sl.Schedules {
			tw.row(s.Source, s.Workflow, s.Cron, nextTick(now, s.NextTick), lastScheduledRun(s.LastRun))
		}
		if err := tw.flush(); err != nil {
			return err
		}
	case source != "":
		printLine(w, false, "no schedules of source %s (schedules come from the on: schedule triggers of the workflows at its default branch head)", source)
	default:
		fmt.Fprintln(w, "no schedules (schedules come from the on: schedule triggers of the workflows at each source's default branch head)")
	}
	if len(sl.Problems) > 0 {
		fmt.Fprintln(w, "problems:")
		for _, p := range sl.Problems {
			for i, line := range strings.Split(strings.TrimRight(p.Error, "\n"), "\n") {
				if i == 0 {
					printLine(w, false, "  %s: %s", p.Source, line)
				} else {
					printLine(w, false, "    %s", line)
				}
			}
		}
	}
	if sl.RefreshedAt.IsZero() {
		fmt.Fprintln(w, "workflows not read yet: the orchestrator is still reading its sources")
	} else {
		fmt.Fprintf(w, "workflows read at %s (%s) by this orchestrator\n", utcTime(sl.RefreshedAt), ago(now, sl.RefreshedAt))
	}
	return nil
}

// nextTick is a schedule's next tick in UTC and from now ("in 42s"), or
// "never" for a spec that does not fire again.
func nextTick(now time.Time, t *time.Time) string {
	if t == nil {
		return "never"
	}
	return utcTime(*t) + " (" + until(now, *t) + ")"
}

// lastScheduledRun is "TICK RUN STATUS", or "-" when no tick started a
// run; a run deleted since shows as "deleted".
func lastScheduledRun(r *apiv1.ScheduledRun) string {
	if r == nil {
		return "-"
	}
	status := r.Status
	if status == "" {
		status = "deleted"
	}
	return utcTime(r.Tick) + " " + r.RunID + " " + status
}

// utcTime is t in UTC as RFC 3339, to the second.
func utcTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
