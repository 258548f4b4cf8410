package admincli

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/kici-dev/kici/internal/apiv1"
)

func newPeersListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the orchestrators of this cluster and which one leads",
		Long: `List the nodes of the cluster as the answering orchestrator sees them:
each one's id, role, public URL, whether its heartbeat is current and when
it was last seen. LEADER marks the node that runs the singleton duties
(retention, the delivery-id purge), and SELF the one that answered. A
standalone orchestrator lists itself, as its own leader. -o json prints
{"self": ID, "leader": ID, "peers": [...]}; "leader" is "" while no
coordinator holds the leader lease.`,
		Example: `  kici-admin peers list
  kici-admin peers list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var pl apiv1.PeerList
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/peers", nil, nil, &pl); err != nil {
				return fmt.Errorf("list peers: %w", err)
			}
			if output == formatJSON {
				pl.Peers = nonNil(pl.Peers)
				return writeJSON(cmd.OutOrStdout(), pl)
			}
			return printPeers(cmd.OutOrStdout(), a.env.now(), pl)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printPeers writes the table of nodes, the leader first.
func printPeers(w io.Writer, now time.Time, pl apiv1.PeerList) error {
	if pl.Leader == "" {
		fmt.Fprintln(w, "no leader: no coordinator holds the leader lease")
	}
	tw := newTable(w)
	tw.row("ID", "ROLE", "ADDRESS", "STATE", "LAST SEEN", "")
	for _, p := range pl.Peers {
		state := "connected"
		if !p.Connected {
			state = "gone"
		}
		var marks []string
		if p.ID == pl.Leader {
			marks = append(marks, "LEADER")
		}
		if p.ID == pl.Self {
			marks = append(marks, "SELF")
		}
		tw.row(p.ID, p.Role, dash(p.Address), state, ago(now, p.LastSeen), list(marks))
	}
	return tw.flush()
}
