package admincli

import (
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newRunsWatchCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a run live and exit 0 only if it ends in success",
		Long: `Follow run ID live from the orchestrator's event stream: status changes as
"JOB: STATUS" (steps as "JOB: step N "NAME" STATUS"), log lines as
"JOB | TEXT", and at the end "run ID STATUS" with the run's error, if any,
below it. The exit status is 0 only if the run ended in success.

Lines are shown from the moment watching starts; kici-admin runs logs ID
prints what came before. A run that has already ended prints its status
at once. If the stream breaks off, watch reconnects. Steps are numbered
from 0. Control characters in what the server sends (job output, names,
errors) are printed escaped, as kici-admin runs logs prints them.`,
		Example: `  kici-admin runs watch r-103`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			runs, err := a.followRuns(cmd.Context(), c, []apiv1.RunRef{{ID: args[0]}}, out)
			return reportOutcome(out, runs, err)
		},
	}
	return cmd
}
