package admincli

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newAgentsListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the connected agents, their labels, the jobs they run and their drains",
		Long: `List the connected agents: backend, host, version, labels, the jobs they
are running and since when they are connected. DRAIN says "drained" (with
the reason) for an agent drained by "kici-admin agents drain": it takes no
new job and finishes the ones it runs. Drained agents that are not connected
follow the table, with who drained them and when; -o json prints both lists
as the API gives them ("agents" and "drains").`,
		Example: `  kici-admin agents list
  kici-admin agents list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var al apiv1.AgentList
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/agents", nil, nil, &al); err != nil {
				return fmt.Errorf("list agents: %w", err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				al.Agents = nonNil(al.Agents)
				al.Drains = nonNil(al.Drains)
				return writeJSON(out, al)
			}
			return printAgents(out, a.env.now(), al)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printAgents writes the table of connected agents, then the drained
// agents that are not connected.
func printAgents(w io.Writer, now time.Time, al apiv1.AgentList) error {
	drains := make(map[string]apiv1.AgentDrain, len(al.Drains))
	for _, d := range al.Drains {
		drains[d.AgentID] = d
	}
	connected := make(map[string]bool, len(al.Agents))
	if len(al.Agents) == 0 {
		fmt.Fprintln(w, "no agents connected")
	} else {
		tw := newTable(w)
		tw.row("ID", "BACKEND", "HOST", "VERSION", "LABELS", "BUSY WITH", "CONNECTED", "DRAIN")
		for _, ag := range al.Agents {
			connected[ag.ID] = true
			busy := "idle"
			if len(ag.BusyJobs) > 0 {
				busy = list(ag.BusyJobs)
			}
			drain := "-"
			if d, ok := drains[ag.ID]; ok || ag.Draining {
				drain = "drained"
				if r := oneLine(d.Reason); r != "" {
					drain += ": " + r
				}
			}
			tw.row(ag.ID, dash(ag.Backend), dash(ag.Hostname), dash(ag.Version), list(ag.Labels), busy, ago(now, ag.ConnectedAt), drain)
		}
		if err := tw.flush(); err != nil {
			return err
		}
	}
	first := true
	for _, d := range al.Drains {
		if connected[d.AgentID] {
			continue
		}
		if first {
			fmt.Fprintln(w, "\ndrained, not connected:")
			first = false
		}
		reason := oneLine(d.Reason)
		if reason == "" {
			reason = "no reason given"
		}
		by := ""
		if d.DrainedBy != "" {
			by = " by " + d.DrainedBy
		}
		fmt.Fprintf(w, "  %s: %s (drained%s %s)\n", d.AgentID, reason, by, ago(now, d.DrainedAt))
	}
	return nil
}
