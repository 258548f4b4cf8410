package admincli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

func newPeersJoinTokenRevokeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "revoke ID",
		Aliases: []string{"forget"},
		Short:   "Make a join token unusable before it is used or expires",
		Long: `Revoke the join token ID (as "kici-admin peers join-token list" shows it):
no worker can join with it from now on. Revoking a revoked token is not an
error; an unknown ID fails with 404. A token already used stays "used": the
worker that joined with it keeps its certificate (revoke the worker with
"kici-admin peers revoke" for that). Needs a token with peer.manage (owner or
admin).`,
		Example: `  kici-admin peers join-token revoke 6f1d2c3b4a59`,
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
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/peers/join-tokens/"+url.PathEscape(id), nil, nil, nil); err != nil {
				return fmt.Errorf("revoke join token %s: %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "join token %s revoked\n", id)
			return nil
		},
	}
}
