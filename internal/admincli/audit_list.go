package admincli

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// auditListFlags are the options of `kici-admin audit list`.
type auditListFlags struct {
	actor   string
	action  string
	outcome string
	since   string
	before  string
	limit   int
	output  string
}

func newAuditListCmd(a *app) *cobra.Command {
	var f auditListFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the audit log: every change and every refused request, newest first",
		Long: `List the audit log, newest first: every change made through the API (with
its outcome) and every request refused for a missing, invalid or
insufficient token, with who, what, on what, how it ended and when.

When more entries match than --limit, the command for the next page goes
to stderr.`,
		Example: `  kici-admin audit list
  kici-admin audit list --outcome denied --since 24h
  kici-admin audit list --action secret. -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			switch f.outcome {
			case "", "allowed", "denied", "failed":
			default:
				return usagef("--outcome %q: want allowed, denied or failed", f.outcome)
			}
			if f.limit < 1 || f.limit > 1000 {
				return usagef("--limit %d: want 1 to 1000", f.limit)
			}
			q := url.Values{"limit": {strconv.Itoa(f.limit)}}
			for k, v := range map[string]string{"actor": f.actor, "action": f.action, "outcome": f.outcome, "since": f.since, "before": f.before} {
				if v != "" {
					q.Set(k, v)
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var al apiv1.AuditList
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/audit", q, nil, &al); err != nil {
				return fmt.Errorf("list audit log: %w", err)
			}
			out := cmd.OutOrStdout()
			al.Entries = nonNil(al.Entries)
			if f.output == formatJSON {
				return writeJSON(out, al)
			}
			if len(al.Entries) == 0 {
				fmt.Fprintln(out, "no audit entries")
				return nil
			}
			tw := newTable(out)
			tw.row("TIME", "ACTOR", "ROLE", "ACTION", "TARGET", "OUTCOME", "STATUS", "CLIENT", "DETAIL")
			for _, e := range al.Entries {
				actor := e.ActorType
				if e.ActorName != "" {
					actor = e.ActorName
				} else if e.ActorID != "" {
					actor = e.ActorType + ":" + e.ActorID
				}
				status := "-"
				if e.Status != 0 {
					status = strconv.Itoa(e.Status)
				}
				tw.row(e.Time.UTC().Format(time.DateTime), actor, dash(e.Role), e.Action, dash(e.Target), e.Outcome, status,
					dash(e.ClientAddr), dash(e.Detail))
			}
			if err := tw.flush(); err != nil {
				return err
			}
			if al.Next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "kici-admin: more entries: add --before %s\n", al.Next)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.actor, "actor", "", "only entries of the token with this `ID` (\"bootstrap\" for the bootstrap token)")
	fl.StringVar(&f.action, "action", "", "only this `ACTION` (e.g. secret.set), or a prefix ending in . (e.g. secret.)")
	fl.StringVar(&f.outcome, "outcome", "", "only this `OUTCOME`: allowed, denied or failed")
	fl.StringVar(&f.since, "since", "", "only entries from this `TIME` on: RFC 3339, or a duration back from now (e.g. 24h)")
	fl.StringVar(&f.before, "before", "", "only entries older than the entry with this `ID` (the next page)")
	fl.IntVar(&f.limit, "limit", 100, "at most `N` entries (1 to 1000)")
	addOutputFlag(cmd, &f.output)
	return cmd
}
