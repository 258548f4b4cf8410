package admincli

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/kici-dev/kici/internal/apiv1"
)

func newPeersJoinTokenCreateCmd(a *app) *cobra.Command {
	var ttl, output string
	cmd := &cobra.Command{
		Use:   "create [--ttl D]",
		Short: "Create a token a worker joins the cluster with; it is shown only this once",
		Long: `Create a join token: a worker presents it once, at its first join, and gets
a client certificate of the cluster's CA in exchange. The token pins that CA
(the worker checks the coordinator's CA against it before it sends the
token's secret), is good for one join, and expires after --ttl (24h unless
given, 30d at most). The first token a cluster creates also creates its CA.

The token is printed only this once: store it now. A reminder goes to
stderr, so stdout holds only the answer; -o json prints
{"token": ..., "id": ..., "expires_at": ...}. Only coordinators issue join
tokens (a standalone orchestrator answers 409). Needs a token with
peer.manage (owner or admin).`,
		Example: `  kici-admin peers join-token create
  kici-admin peers join-token create --ttl 1h -o json | jq -r .token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var tok apiv1.JoinTokenCreated
			if err := c.do(cmd.Context(), http.MethodPost, "/api/v1/peers/join-tokens", nil, apiv1.JoinTokenRequest{TTL: ttl}, &tok); err != nil {
				return fmt.Errorf("create join token: %w", err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				if err := writeJSON(out, tok); err != nil {
					return err
				}
			} else {
				tw := newTable(out)
				tw.row("id:", tok.ID)
				tw.row("expires:", expiry(&tok.ExpiresAt))
				tw.row("token:", tok.Token)
				if err := tw.flush(); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "kici-admin: this join token will not be shown again; give it to the worker now (it is good for one join)")
			return nil
		},
	}
	cmd.Flags().StringVar(&ttl, "ttl", "", "`DURATION` the token may be used for, e.g. 1h or 7d (default 24h, at most 30d)")
	addOutputFlag(cmd, &output)
	return cmd
}
