package admincli

import (
	"fmt"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newRunsRerunCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "rerun ID",
		Short: "Start a new run of the same workflow, event and commit as run ID",
		Example: `  kici-admin runs rerun r-102
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
			var ref apiv1.RunRef
			if err := c.do(cmd.Context(), http.MethodPost, runPath(args[0])+"/rerun", nil, nil, &ref); err != nil {
				return fmt.Errorf("rerun run %q: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				return writeJSON(out, ref)
			}
			fmt.Fprintf(out, "started run %s (workflow %s), a rerun of %s\n", ref.ID, dash(ref.Workflow), args[0])
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
