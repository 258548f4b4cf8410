package admincli

import (
	"fmt"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// tokensCreateFlags are the options of `kici-admin tokens create`.
type tokensCreateFlags struct {
	name      string
	role      string
	expiresIn string
	output    string
}

func newTokensCreateCmd(a *app) *cobra.Command {
	var f tokensCreateFlags
	cmd := &cobra.Command{
		Use:   "create --name N --role owner|admin|auditor",
		Short: "Create an admin token; it is shown only this once",
		Long: `Create a token for the API and kici-admin (its KICI_ADMIN_TOKEN), with one
role:

  owner    everything, including tokens and the secret key
  admin    everything except managing tokens and rotating the key
  auditor  read-only: runs, logs, queue, agents, scalers and the audit log;
           never secrets

The token is printed only this once: store it now. A reminder goes to
stderr, so stdout holds only the answer. Only an owner may create tokens.`,
		Example: `  kici-admin tokens create --name "alice laptop" --role admin
  kici-admin tokens create --name dashboards --role auditor --expires-in 90d -o json | jq -r .token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if f.name == "" {
				return usagef("--name is required: say whose or what the token is")
			}
			switch f.role {
			case "owner", "admin", "auditor":
			case "":
				return usagef("--role is required: owner, admin or auditor")
			default:
				return usagef("--role %q: want owner, admin or auditor", f.role)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var tok apiv1.AdminToken
			req := apiv1.AdminTokenRequest{Name: f.name, Role: f.role, ExpiresIn: f.expiresIn}
			if err := c.do(cmd.Context(), http.MethodPost, "/api/v1/tokens", nil, req, &tok); err != nil {
				return fmt.Errorf("create admin token: %w", err)
			}
			out := cmd.OutOrStdout()
			if f.output == formatJSON {
				if err := writeJSON(out, tok); err != nil {
					return err
				}
			} else {
				tw := newTable(out)
				tw.row("id:", tok.ID)
				tw.row("name:", tok.Name)
				tw.row("role:", tok.Role)
				tw.row("expires:", expiry(tok.ExpiresAt))
				tw.row("token:", tok.Token)
				if err := tw.flush(); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "kici-admin: this token will not be shown again; store it now (kici-admin reads it from KICI_ADMIN_TOKEN)")
			return nil
		},
	}
	cmd.Flags().StringVar(&f.name, "name", "", "`NAME` saying whose or what the token is")
	cmd.Flags().StringVar(&f.role, "role", "", "`ROLE` of the token: owner, admin or auditor")
	cmd.Flags().StringVar(&f.expiresIn, "expires-in", "", "`DURATION` after which the token stops working, e.g. 720h or 90d (default never)")
	addOutputFlag(cmd, &f.output)
	return cmd
}
