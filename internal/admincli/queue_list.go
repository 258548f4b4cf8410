package admincli

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// queuePageSize is the page size queue list asks for: the server's most.
const queuePageSize = 1000

func newQueueListCmd(a *app) *cobra.Command {
	var output string
	var limit int
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the queued jobs and why each is still waiting",
		Long: `List the jobs in the dispatch queue, oldest first, and why each is still
waiting. A job is queued (waiting for an agent) or dispatched (handed to
one). Every page of the listing is read unless --limit stops earlier.`,
		Example: `  kici-admin queue list
  kici-admin queue list --limit 20
  kici-admin queue list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if limit < 0 {
				return usagef("--limit %d: want 0 (every entry) or more", limit)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var q apiv1.Queue
			cursor := ""
			for {
				size := queuePageSize
				if limit > 0 {
					size = min(size, limit-len(q.Jobs))
				}
				query := url.Values{"limit": {strconv.Itoa(size)}}
				if cursor != "" {
					query.Set("cursor", cursor)
				}
				var page apiv1.Queue
				if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/queue", query, nil, &page); err != nil {
					return fmt.Errorf("list queue: %w", err)
				}
				q.Jobs = append(q.Jobs, page.Jobs...)
				if page.NextCursor == "" || (limit > 0 && len(q.Jobs) >= limit) {
					// Stopped by --limit: -o json tells where to go on.
					q.NextCursor = page.NextCursor
					break
				}
				if page.NextCursor == cursor || len(page.Jobs) == 0 {
					return fmt.Errorf("list queue: the server returned page cursor %q again", cursor)
				}
				cursor = page.NextCursor
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
			if err := tw.flush(); err != nil {
				return err
			}
			if q.NextCursor != "" {
				fmt.Fprintf(out, "(more entries follow; raise --limit, or 0 for all)\n")
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().IntVar(&limit, "limit", 0, "show at most this many entries, oldest first (0 = every entry)")
	return cmd
}
