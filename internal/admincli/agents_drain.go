package admincli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// agentDrainPath is the drain of agent id: POST sets it, DELETE lifts it.
func agentDrainPath(id string) string { return "/api/v1/agents/" + url.PathEscape(id) + "/drain" }

// agentsDrainFlags are the options of `kici-admin agents drain`.
type agentsDrainFlags struct {
	reason string
	output string
}

func newAgentsDrainCmd(a *app) *cobra.Command {
	var f agentsDrainFlags
	cmd := &cobra.Command{
		Use:   "drain ID [--reason TEXT]",
		Short: "Drain an agent: it takes no new job and finishes the ones it runs",
		Long: `Drain agent ID before maintenance of its host (a reboot, a kernel or disk
upgrade, a move): the orchestrator sends it no new job, and the jobs it is
running finish normally. New jobs go to other agents with the labels they
need, or wait in the queue. Once "kici-admin agents list" shows the agent
idle, its host can be stopped.

The drain is kept by the orchestrator, so it outlives the agent's reconnects
and the orchestrator's restarts until "kici-admin agents undrain ID" lifts it.
An agent that is not connected can be drained too (it then takes no job when
it connects), and draining a drained agent replaces its reason. --reason is
shown by "kici-admin agents list"; "kici-admin queue list" says when a job
waits because the agents that fit it are drained. Needs an owner or admin
token.`,
		Example: `  kici-admin agents drain agent-1 --reason "kernel upgrade on ci-1"
  kici-admin agents list                 # wait until agent-1 is idle, then stop it
  kici-admin agents undrain agent-1      # after the maintenance
  kici-admin agents drain agent-1 -o json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			id := args[0]
			if strings.TrimSpace(id) == "" {
				return usagef("ID is empty")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var d apiv1.AgentDrain
			req := apiv1.AgentDrainRequest{Reason: f.reason}
			if err := c.do(cmd.Context(), http.MethodPost, agentDrainPath(id), nil, req, &d); err != nil {
				return fmt.Errorf("drain agent %s: %w", id, err)
			}
			out := cmd.OutOrStdout()
			if f.output == formatJSON {
				return writeJSON(out, d)
			}
			if d.AgentID == "" {
				d.AgentID = id
			}
			reason := ""
			if r := oneLine(d.Reason); r != "" {
				reason = " (reason: " + r + ")"
			}
			fmt.Fprintf(out, "agent %s drained%s: it takes no new jobs, running ones finish (undo with: kici-admin agents undrain %s)\n",
				d.AgentID, reason, d.AgentID)
			return nil
		},
	}
	cmd.Flags().StringVar(&f.reason, "reason", "", "`TEXT` saying why the agent is drained, shown by agents list")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// oneLine is s with every run of white space (new lines and tabs
// included) made one space, so it fits a table cell or a line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
