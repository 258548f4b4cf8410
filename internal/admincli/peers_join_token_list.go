package admincli

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/kici-dev/kici/internal/apiv1"
)

func newPeersJoinTokenListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the join tokens: state, creator, expiry, the node that used each (never the tokens)",
		Long: `List every join token the cluster issued, oldest first: its id, its state
(active, used, expired or revoked), who created it and when, when it expires
and the node that joined with it. The secrets are not stored, so they are
never shown. -o json prints {"tokens": [...]}. Needs a token with
peer.manage (owner or admin).`,
		Example: `  kici-admin peers join-token list
  kici-admin peers join-token list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var tl apiv1.JoinTokenList
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/peers/join-tokens", nil, nil, &tl); err != nil {
				return fmt.Errorf("list join tokens: %w", err)
			}
			out := cmd.OutOrStdout()
			tl.Tokens = nonNil(tl.Tokens)
			if output == formatJSON {
				return writeJSON(out, tl)
			}
			if len(tl.Tokens) == 0 {
				fmt.Fprintln(out, "no join tokens")
				return nil
			}
			now := a.env.now()
			tw := newTable(out)
			tw.row("ID", "STATE", "CREATED BY", "CREATED", "EXPIRES", "USED BY", "USED")
			for _, t := range tl.Tokens {
				tw.row(t.ID, t.State, dash(t.CreatedBy), ago(now, t.CreatedAt), expiry(t.ExpiresAt), dash(t.UsedBy), agoPtr(now, t.UsedAt))
			}
			return tw.flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
