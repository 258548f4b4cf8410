package admincli

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

func newAgentsUndrainCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "undrain ID",
		Short: "Lift an agent's drain: it takes new jobs again",
		Long: `Lift the drain of agent ID ("kici-admin agents drain"), typically once the
maintenance of its host is over: the orchestrator sends it jobs again, at once
if it is connected, else as soon as it connects. Undraining an agent that is
not drained fails (404, exit status 1). Needs an owner or admin token.`,
		Example: `  kici-admin agents undrain agent-1`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if strings.TrimSpace(id) == "" {
				return usagef("ID is empty")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodDelete, agentDrainPath(id), nil, nil, nil); err != nil {
				return fmt.Errorf("undrain agent %s: %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "agent %s undrained: it takes new jobs again\n", id)
			return nil
		},
	}
}
