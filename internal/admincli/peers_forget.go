package admincli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

func newPeersForgetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "forget ID",
		Short: "Drop a departed coordinator or worker from the peer list",
		Long: `Drop the coordinator or worker ID ("kici-admin peers list") from the
cluster's peer list once it is gone for good (its host retired, its data dir
deleted). A peer that is connected, or was seen in the last 30 seconds, is
refused (409, exit status 1), and so is the orchestrator answering; so is a
worker whose scaler agents still hold jobs in the dispatch queue (they may
come back through it within their recovery window). An unknown ID fails
with 404. A peer that was forgotten and starts again simply registers anew.
Needs a token with peer.manage (owner or admin).`,
		Example: `  kici-admin peers forget 5d2e9a70-1f3b-4c8e-a6d4-7b0c9e2f1a33`,
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
			if err := c.do(cmd.Context(), http.MethodDelete, "/api/v1/peers/"+url.PathEscape(id), nil, nil, nil); err != nil {
				return fmt.Errorf("forget peer %s: %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "peer %s forgotten\n", id)
			return nil
		},
	}
}
