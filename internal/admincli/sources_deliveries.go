package admincli

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// deliveriesPath is the delivery log of a source.
func deliveriesPath(source string) string { return sourcePath(source) + "/deliveries" }

func newSourcesDeliveriesCmd(a *app) *cobra.Command {
	var output, cursor string
	var limit int
	cmd := &cobra.Command{
		Use:   "deliveries NAME",
		Short: "List the newest webhook deliveries of source NAME and what became of each",
		Long: `List the newest webhook deliveries of source NAME, newest first: each with
its id, event, when it was received, its verdict (accepted, duplicate,
ignored, rejected_signature, invalid_payload, invalid_workflow, no_match,
failed), the runs it started and its error. An invalid_workflow delivery ran
the commit's valid workflows; its error lists each problem of the others as
FILE:LINE:COL: message. When more deliveries are kept than --limit shows, the
last line says how to read the next page.`,
		Example: `  kici-admin sources deliveries app
  kici-admin sources deliveries app --limit 10
  kici-admin sources deliveries app -o json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if limit < 1 || limit > 1000 {
				return usagef("--limit %d: want 1 to 1000", limit)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			query := url.Values{"limit": {strconv.Itoa(limit)}}
			if cursor != "" {
				query.Set("cursor", cursor)
			}
			var dl apiv1.DeliveryList
			if err := c.do(cmd.Context(), http.MethodGet, deliveriesPath(args[0]), query, nil, &dl); err != nil {
				return fmt.Errorf("list deliveries of source %q: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				dl.Deliveries = nonNil(dl.Deliveries)
				return writeJSON(out, dl)
			}
			if len(dl.Deliveries) == 0 {
				fmt.Fprintf(out, "no deliveries of source %s\n", args[0])
				return nil
			}
			printDeliveries(out, a.env.now(), dl.Deliveries)
			if dl.NextCursor != "" {
				fmt.Fprintf(out, "older deliveries: kici-admin sources deliveries %s --limit %d --cursor %s\n", args[0], limit, dl.NextCursor)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "show at most `N` deliveries (1 to 1000)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after the page that printed this `CURSOR`")
	addOutputFlag(cmd, &output)
	return cmd
}

// printDeliveries writes deliveries as a table, then the error of each
// one that has one, a line per problem.
func printDeliveries(w io.Writer, now time.Time, ds []apiv1.Delivery) {
	tw := newTable(w)
	tw.row("ID", "RECEIVED", "EVENT", "VERDICT", "RUNS", "DETAIL")
	for _, d := range ds {
		detail := d.Detail
		if d.RedeliveryOf != "" {
			detail = strings.TrimSuffix("redelivery of "+d.RedeliveryOf+"; "+detail, "; ")
		}
		tw.row(d.ID, ago(now, d.ReceivedAt), dash(d.Event), d.Verdict, list(d.Runs), dash(detail))
	}
	tw.flush()
	for _, d := range ds {
		if d.Error == "" || d.Error == d.Detail {
			continue
		}
		fmt.Fprintf(w, "\n%s %s:\n", d.ID, d.Verdict)
		for _, line := range strings.Split(d.Error, "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

func newSourcesRedeliverCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "redeliver NAME ID",
		Short: "Run stored delivery ID of source NAME again, as a new delivery",
		Long: `Run the stored webhook delivery ID of source NAME again (the ID of
kici-admin sources deliveries). Only an accepted or invalid_workflow
delivery keeps its body and can be redelivered. The redelivery is recorded
as a new delivery that names the original; the delivery-id dedup does not
refuse it.`,
		Example: `  kici-admin sources redeliver app 0199a3c4-…
  kici-admin sources redeliver app 0199a3c4-… -o json`,
		Args: exactArgs("NAME", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var re apiv1.Redelivery
			path := deliveriesPath(args[0]) + "/" + url.PathEscape(args[1]) + "/redeliver"
			if err := c.do(cmd.Context(), http.MethodPost, path, nil, nil, &re); err != nil {
				return fmt.Errorf("redeliver delivery %q of source %q: %w", args[1], args[0], err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				re.Runs = nonNil(re.Runs)
				return writeJSON(out, re)
			}
			fmt.Fprintf(out, "delivery %s (%s), a redelivery of %s\n", re.Delivery.ID, re.Delivery.Verdict, args[1])
			for _, run := range re.Runs {
				fmt.Fprintf(out, "started run %s (workflow %s)\n", run.ID, dash(run.Workflow))
			}
			if len(re.Runs) == 0 {
				fmt.Fprintf(out, "no run started: %s\n", dash(re.Delivery.Detail))
			}
			if len(re.Problems) > 0 {
				fmt.Fprintln(out, "invalid workflows, not run:")
				for _, p := range re.Problems {
					fmt.Fprintf(out, "  %s\n", p)
				}
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
