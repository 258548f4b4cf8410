package admincli

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newSecretsListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the secrets' names and metadata (never their values)",
		Example: `  kici-admin secrets list
  kici-admin secrets list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var sl apiv1.SecretList
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/secrets", nil, nil, &sl); err != nil {
				return fmt.Errorf("list secrets: %w", err)
			}
			out := cmd.OutOrStdout()
			sl.Secrets = nonNil(sl.Secrets)
			if output == formatJSON {
				return writeJSON(out, sl)
			}
			if len(sl.Secrets) == 0 {
				fmt.Fprintln(out, "no secrets")
				return nil
			}
			now := a.env.now()
			tw := newTable(out)
			tw.row("NAME", "SCOPE", "UPDATED", "UPDATED BY", "CREATED", "KEY VERSION")
			for _, s := range sl.Secrets {
				src := s.Source
				switch {
				case s.Environment != "":
					src = "env " + s.Environment
				case src == "":
					src = "(all)"
				}
				tw.row(s.Name, src, ago(now, s.UpdatedAt), dash(s.UpdatedBy), ago(now, s.CreatedAt), strconv.Itoa(s.KeyVersion))
			}
			return tw.flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
