package admincli

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// runsListFlags are the options of `kici-admin runs list`.
type runsListFlags struct {
	status   string
	source   string
	workflow string
	branch   string
	limit    int
	output   string
}

func newRunsListCmd(a *app) *cobra.Command {
	var f runsListFlags
	cmd := &cobra.Command{
		Use:     "list [--status S] [--source NAME] [--workflow W] [--branch B] [--limit N]",
		Aliases: []string{"ls"},
		Short:   "List runs, newest first",
		Example: `  kici-admin runs list
  kici-admin runs list --status failure --source hello --limit 5
  kici-admin runs list --workflow ci.yml --branch main
  kici-admin runs list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			q := url.Values{}
			if f.status != "" {
				if !slices.Contains(runStatuses, f.status) {
					return usagef("--status %q: want one of %s", f.status, strings.Join(runStatuses, ", "))
				}
				q.Set("status", f.status)
			}
			if f.source != "" {
				q.Set("source", f.source)
			}
			if f.workflow != "" {
				q.Set("workflow", f.workflow)
			}
			if f.branch != "" {
				q.Set("branch", f.branch)
			}
			if f.limit < 0 {
				return usagef("--limit %d: want 0 or more", f.limit)
			}
			if f.limit > 0 {
				q.Set("limit", strconv.Itoa(f.limit))
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var rl apiv1.RunList
			if err := c.do(cmd.Context(), http.MethodGet, runsPath(), q, nil, &rl); err != nil {
				return fmt.Errorf("list runs: %w", err)
			}
			out := cmd.OutOrStdout()
			if f.output == formatJSON {
				rl.Runs = nonNil(rl.Runs)
				return writeJSON(out, rl)
			}
			if len(rl.Runs) == 0 {
				fmt.Fprintln(out, "no runs")
				return nil
			}
			now := a.env.now()
			tw := newTable(out)
			tw.row("ID", "SOURCE", "WORKFLOW", "EVENT", "REF", "STATUS", "CREATED", "DURATION")
			for _, r := range rl.Runs {
				tw.row(r.ID, dash(r.Source), dash(r.Workflow), dash(eventKind(r.Event)), dash(r.Ref), r.Status,
					ago(now, r.CreatedAt), elapsed(now, r.StartedAt, r.FinishedAt))
			}
			return tw.flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.status, "status", "", "only runs in `STATUS`: "+strings.Join(runStatuses, ", "))
	fl.StringVar(&f.source, "source", "", "only runs of source `NAME`")
	fl.StringVar(&f.workflow, "workflow", "", "only runs of workflow `W` (as runs list shows it)")
	fl.StringVar(&f.branch, "branch", "", "only runs of branch `B` (its name, or refs/heads/B)")
	fl.IntVar(&f.limit, "limit", 0, "at most `N` runs (0: the server's default)")
	addOutputFlag(cmd, &f.output)
	return cmd
}
