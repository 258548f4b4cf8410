package admincli

import (
	"fmt"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newAgentsListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the connected agents, their labels and the jobs they run",
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
				return writeJSON(out, al)
			}
			if len(al.Agents) == 0 {
				fmt.Fprintln(out, "no agents connected")
				return nil
			}
			now := a.env.now()
			tw := newTable(out)
			tw.row("ID", "BACKEND", "HOST", "VERSION", "LABELS", "BUSY WITH", "CONNECTED")
			for _, ag := range al.Agents {
				busy := "idle"
				if len(ag.BusyJobs) > 0 {
					busy = list(ag.BusyJobs)
				}
				tw.row(ag.ID, dash(ag.Backend), dash(ag.Hostname), dash(ag.Version), list(ag.Labels), busy, ago(now, ag.ConnectedAt))
			}
			return tw.flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
