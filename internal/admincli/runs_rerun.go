package admincli

import (
	"fmt"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newRunsRerunCmd(a *app) *cobra.Command {
	var output string
	var failed bool
	cmd := &cobra.Command{
		Use:   "rerun ID",
		Short: "Start a new run of the same workflow, event and commit as run ID",
		Long: `Start a new run of the same workflow, event and commit as run ID, as its
child (its parent_run_id is ID).

With --failed, only the jobs of ID that failed or were cancelled run again,
with every job downstream of them; the other jobs are copied into the new
run as they ended (a job that succeeded is not run again, and its
dependants see it succeeded). ID must have ended with a job that failed or
was cancelled.`,
		Example: `  kici-admin runs rerun r-102
  kici-admin runs rerun r-102 --failed
  kici-admin runs rerun r-102 -o json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var body any // no body: the whole run, as before --failed existed
			if failed {
				body = apiv1.RerunRequest{Failed: true}
			}
			var ref apiv1.RunRef
			if err := c.do(cmd.Context(), http.MethodPost, runPath(args[0])+"/rerun", nil, body, &ref); err != nil {
				return fmt.Errorf("rerun run %q: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				return writeJSON(out, ref)
			}
			what := "a rerun of " + args[0]
			if failed {
				what = "a rerun of the failed jobs of " + args[0]
			}
			fmt.Fprintf(out, "started run %s (workflow %s), %s\n", ref.ID, dash(ref.Workflow), what)
			return nil
		},
	}
	cmd.Flags().BoolVar(&failed, "failed", false, "rerun only the jobs that failed or were cancelled, and those downstream of them")
	addOutputFlag(cmd, &output)
	return cmd
}
