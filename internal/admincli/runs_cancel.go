package admincli

import (
	"fmt"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// runsCancelFlags are the options of `kici-admin runs cancel`.
type runsCancelFlags struct {
	force  bool
	output string
}

func newRunsCancelCmd(a *app) *cobra.Command {
	var f runsCancelFlags
	cmd := &cobra.Command{
		Use:   "cancel ID [--force]",
		Short: "Cancel a run: running steps are interrupted, then killed after their grace period",
		Long: `Cancel run ID. Steps that are running get their interrupt signal and are
killed after the grace period, or at once with --force; jobs that have not
started are cancelled. The run's status is printed as the server reports it
right after the request: "running" means the cancellation is under way
(follow it with kici-admin runs watch ID). A run that has already ended is
refused by the server (409) and the exit status is 1.`,
		Example: `  kici-admin runs cancel r-103
  kici-admin runs cancel r-103 --force -o json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var run apiv1.Run
			req := apiv1.CancelRequest{Force: f.force}
			if err := c.do(cmd.Context(), http.MethodPost, runPath(args[0])+"/cancel", nil, req, &run); err != nil {
				return fmt.Errorf("cancel run %q: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			if f.output == formatJSON {
				return writeJSON(out, run)
			}
			if terminalRun(run.Status) {
				fmt.Fprintf(out, "run %s %s\n", run.ID, run.Status)
			} else {
				fmt.Fprintf(out, "run %s %s: cancelling (follow with: kici-admin runs watch %s)\n", run.ID, run.Status, run.ID)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&f.force, "force", false, "kill running steps at once instead of after their grace period")
	addOutputFlag(cmd, &f.output)
	return cmd
}
