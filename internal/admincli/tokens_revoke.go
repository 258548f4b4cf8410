package admincli

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

func newTokensRevokeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an admin token: it stops working at once",
		Long: `Revoke an admin token. Its next request is refused (401); the token stays in
the list, marked revoked, so the audit log keeps naming it. Revoking the
token kici-admin itself uses is allowed.`,
		Example: `  kici-admin tokens revoke 0197a1c2-…`,
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return usagef("ID is empty")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/tokens/"+url.PathEscape(args[0]), nil, nil, nil); err != nil {
				return fmt.Errorf("revoke admin token %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "admin token %s revoked\n", args[0])
			return nil
		},
	}
}
