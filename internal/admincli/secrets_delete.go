package admincli

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

func newSecretsDeleteCmd(a *app) *cobra.Command {
	var scope secretScope
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret",
		Long: `Delete the secret NAME (of --source or --environment, or the one for every
source). A run one of whose jobs declares a secret nobody set fails when it is
created, naming it.`,
		Example: `  kici-admin secrets delete DEPLOY_TOKEN
  kici-admin secrets delete NPM_TOKEN --source web
  kici-admin secrets delete DEPLOY_KEY --environment production`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return usagef("NAME is empty")
			}
			q, err := scope.query()
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/secrets/"+url.PathEscape(name), q, nil, nil); err != nil {
				return fmt.Errorf("delete secret %s: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s deleted\n", scope.name(name))
			return nil
		},
	}
	scope.flags(cmd, "receive the secret")
	return cmd
}
