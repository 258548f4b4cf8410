package admincli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

func newScalerOrphansStopCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "stop ID...",
		Short: "Stop untracked scaler compute, by agent id",
		Long: `Stop and remove the compute of the named agents (their ids as
"kici-admin scaler orphans list" shows them). Only untracked agents are
stopped: naming one the auto-scaler tracks (it is spawning or running a
job) refuses the request, and nothing is stopped.

Each stopped agent's id is printed. When the orchestrator refuses some of
them (a tracked agent, an id with no live compute, a backend that cannot
stop untracked compute), the ids it did stop are printed, its reasons go
to stderr and the exit status is 1. A container gets its stop grace period
(10 s) before it is killed; raise --timeout if that takes longer than 30 s.`,
		Example: `  kici-admin scaler orphans stop scaler-container-9f8e7d6c
  kici-admin scaler orphans stop scaler-container-9f8e7d6c scaler-container-0b1c2d3e -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing ID: name at least one agent to stop (see kici-admin scaler orphans list)")
			}
			for _, id := range args {
				if strings.TrimSpace(id) == "" {
					return usagef("an agent ID is empty")
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ids := uniqueIDs(args)
			ans, err := c.stopOrphans(cmd.Context(), ids)
			if err != nil {
				return scalerError("stop orphans", err)
			}
			ans.Stopped = nonNil(ans.Stopped)
			out := cmd.OutOrStdout()
			if output == formatJSON {
				if err := writeJSON(out, ans); err != nil {
					return err
				}
			} else {
				for _, id := range ans.Stopped {
					fmt.Fprintf(out, "stopped %s\n", id)
				}
			}
			if ans.Error != "" {
				msg := "stop orphans: the orchestrator refused"
				if len(ans.Stopped) > 0 {
					msg = fmt.Sprintf("stop orphans: stopped %d of %d; the orchestrator refused the rest", len(ans.Stopped), len(ids))
				}
				return newRefusal(msg, ans.Error)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// uniqueIDs is ids without repeats, in their first order.
func uniqueIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
