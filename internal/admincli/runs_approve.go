package admincli

import (
	"fmt"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newRunsApproveCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Start a run awaiting approval (a pull request from a fork) with the source's secrets",
		Long: `Approve run ID, a run of a pull request from a fork that waits with status
awaiting_approval (the source's --fork-pull-requests is approve). Its jobs
are queued and get the secrets they declare, so read the pull request's
change first: the fork's code runs (with the workflows of the base commit).

Needs permission run.approve (roles owner and admin). The approval is in the
audit log with the approver, and in each job's timeline. A run that is not
awaiting approval is refused (exit 1).`,
		Example: `  kici-admin runs list --status awaiting_approval
  kici-admin runs approve r-400
  kici-admin runs approve r-400 -o json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var run apiv1.Run
			if err := c.do(cmd.Context(), http.MethodPost, runPath(args[0])+"/approve", nil, nil, &run); err != nil {
				return fmt.Errorf("approve run %q: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				return writeJSON(out, run)
			}
			fmt.Fprintf(out, "run %s approved: %s (follow with: kici-admin runs watch %s)\n", run.ID, run.Status, run.ID)
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
