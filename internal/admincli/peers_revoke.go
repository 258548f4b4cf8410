package admincli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

func newPeersRevokeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Cut a cluster worker off for good: its certificate is refused from now on",
		Long: `Revoke the worker ID ("kici-admin peers list"): every coordinator refuses
its certificate from now on, where it connects or renews at once and where
it is connected within a heartbeat (5 s), and it leaves the peer list. Use
it for a worker whose host is compromised or retired: a revoked worker
cannot come back with its credential; to bring the host back, join it again
with a new join token, as a new node. The jobs its agents were running wait
out their recovery windows on the coordinators and then fail as "agent
lost". Revoking again is not an error; an orchestrator's id is refused
(409), and so is the command on a standalone orchestrator. Needs a token
with peer.manage (owner or admin).`,
		Example: `  kici-admin peers revoke worker-3f6c1a2e-8d4b-4f0e-9a71-2c5d8e9b0f14`,
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
			if err := c.do(cmd.Context(), http.MethodPost, "/api/v1/peers/"+url.PathEscape(id)+"/revoke", nil, nil, nil); err != nil {
				return fmt.Errorf("revoke peer %s: %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "peer %s revoked: coordinators refuse it from now on\n", id)
			return nil
		},
	}
}
