package admincli

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newAgentTokensRevokeCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an agent token and disconnect the agents using it",
		Long: `Revoke an agent token: agents connected with it are disconnected at once
(close code 4010, and they stop reconnecting), and it is refused from then
on. Their running jobs get the recovery window, then fail as "agent lost".`,
		Example: `  kici-admin agent-tokens revoke at-7
  kici-admin agent-tokens revoke at-7 -o json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if args[0] == "" {
				return usagef("ID is empty")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var ans apiv1.AgentTokenRevoked
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/agent-tokens/"+url.PathEscape(args[0]), nil, nil, &ans); err != nil {
				return fmt.Errorf("revoke agent token %s: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				return writeJSON(out, ans)
			}
			fmt.Fprintf(out, "agent token %s revoked; %d connected agent(s) disconnected\n", ans.ID, ans.Disconnected)
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
