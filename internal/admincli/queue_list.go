package admincli

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newQueueListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the queued jobs and why each is still waiting",
		Example: `  kici-admin queue list
  kici-admin queue list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var q apiv1.Queue
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/queue", nil, nil, &q); err != nil {
				return fmt.Errorf("list queue: %w", err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				q.Jobs = nonNil(q.Jobs)
				return writeJSON(out, q)
			}
			if len(q.Jobs) == 0 {
				fmt.Fprintln(out, "the queue is empty")
				return nil
			}
			now := a.env.now()
			tw := newTable(out)
			tw.row("RUN", "JOB", "STATUS", "LABELS", "AGENT", "ATTEMPTS", "QUEUED", "WHY PENDING")
			for _, j := range q.Jobs {
				tw.row(j.RunID, dash(j.Job), j.Status, list(j.Labels), dash(j.AgentID),
					strconv.Itoa(j.Attempts), ago(now, j.Enqueued), dash(j.WhyPending))
			}
			return tw.flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
