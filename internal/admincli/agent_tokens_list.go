package admincli

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newAgentTokensListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the agent tokens: labels, expiry, last use, connected agents (never the tokens)",
		Example: `  kici-admin agent-tokens list
  kici-admin agent-tokens list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var tl apiv1.AgentTokenList
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/agent-tokens", nil, nil, &tl); err != nil {
				return fmt.Errorf("list agent tokens: %w", err)
			}
			out := cmd.OutOrStdout()
			tl.Tokens = nonNil(tl.Tokens)
			for i := range tl.Tokens {
				tl.Tokens[i].Labels = nonNil(tl.Tokens[i].Labels)
			}
			if output == formatJSON {
				return writeJSON(out, tl)
			}
			if len(tl.Tokens) == 0 {
				fmt.Fprintln(out, "no agent tokens")
				return nil
			}
			now := a.env.now()
			tw := newTable(out)
			tw.row("ID", "LABELS", "STATE", "AGENTS", "CREATED BY", "CREATED", "LAST USED", "EXPIRES")
			for _, t := range tl.Tokens {
				labels := list(t.Labels)
				if len(t.Labels) == 0 {
					labels = "(any)"
				}
				tw.row(t.ID, labels, tokenState(now, t.RevokedAt, t.ExpiresAt), strconv.Itoa(t.Agents), dash(t.CreatedBy),
					ago(now, t.CreatedAt), agoPtr(now, t.LastUsedAt), expiry(t.ExpiresAt))
			}
			return tw.flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
