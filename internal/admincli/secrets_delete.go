package admincli

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

func newSecretsDeleteCmd(a *app) *cobra.Command {
	var source string
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret",
		Long: `Delete the secret NAME (of --source, or the one for every source). A job that
declares a secret nobody set fails at dispatch, naming it.`,
		Example: `  kici-admin secrets delete DEPLOY_TOKEN
  kici-admin secrets delete NPM_TOKEN --source web`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return usagef("NAME is empty")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/secrets/"+url.PathEscape(name), secretQuery(source), nil, nil); err != nil {
				return fmt.Errorf("delete secret %s: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s deleted\n", secretName(name, source))
			return nil
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "`SOURCE` of the secret (default the secret for every source)")
	return cmd
}
