package admincli

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

func newSourcesRemoveCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a source: the orchestrator stops building it",
		Example: `  kici-admin sources remove hello`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodDelete, sourcePath(args[0]), nil, nil, nil); err != nil {
				return fmt.Errorf("remove source %q: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed source %q\n", args[0])
			return nil
		},
	}
	return cmd
}
