package admincli

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kici-dev/kici/internal/scaler"
)

func newScalerOrphansStopCmd(a *app) *cobra.Command {
	var output, node string
	cmd := &cobra.Command{
		Use:   "stop ID...",
		Short: "Stop the named untracked scaler compute, and nothing else",
		Long: `Stop and remove the compute of the named ids (as "kici-admin scaler
orphans list" shows them), one by one: nothing that was not named is
touched. At most 100 ids at a time.

Each id gets one outcome, printed in the order named:
  stopped     it was stopped and removed
  tracked     something tracks it (it may be working); left alone. The
              trackers are checked again right before the kill.
  unverified  its backend cannot confirm it is its own; left alone
  not-live    it does not run; the next orchestrator start removes it
  not-found   no scaler lists compute of that id
  error       the stop failed, or the scaler's backend cannot stop
              untracked compute (the reason is printed)

The exit status is 1 when any outcome is not "stopped". A container gets
its stop grace period (10 s) before it is killed; raise --timeout if that
takes longer than 30 s.

In a cluster, ask the coordinator with --node ID to stop compute on one
node: the coordinator itself or a worker connected to it, by its id as
"kici-admin peers list" shows it (the one "kici-admin scaler orphans list
--node all" printed the ids under). The outcomes follow a "node ID:" line.
When the node cannot be asked (a worker that is gone) or fails as a
whole, its error is printed and the exit status is 1. --node all is
refused: name the one node the ids run on.`,
		Example: `  kici-admin scaler orphans stop scaler-container-9f8e7d6c
  kici-admin scaler orphans stop scaler-container-9f8e7d6c scaler-container-0b1c2d3e -o json
  kici-admin scaler orphans stop --node ci-2 scaler-container-9f8e7d6c`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("node") {
				if err := checkNodeFlag(node, false); err != nil {
					return err
				}
			}
			if len(args) == 0 {
				return usagef("missing ID: name at least one to stop (see kici-admin scaler orphans list)")
			}
			for _, id := range args {
				if strings.TrimSpace(id) == "" {
					return usagef("an ID is empty")
				}
			}
			if err := scaler.ValidateOrphanIDs(uniqueIDs(args)); err != nil {
				return usagef("%v", err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ids := uniqueIDs(args)
			var ans stopOrphansAnswer
			if node == "" {
				if err := c.do(cmd.Context(), http.MethodPost, orphansStopPath, nil, stopOrphansRequest{IDs: ids}, &ans); err != nil {
					return scalerError("stop orphans", err)
				}
				ans.Outcomes = nonNil(ans.Outcomes)
				if err := printStopOutcomes(cmd, output, ans); err != nil {
					return err
				}
			} else {
				var na nodeStopAnswer
				if err := c.do(cmd.Context(), http.MethodPost, orphansStopPath, nil, stopOrphansRequest{IDs: ids, Node: node}, &na); err != nil {
					return scalerError("stop orphans on node "+node, err)
				}
				if na.Node == "" {
					na.Node = node
				}
				na.Outcomes = nonNil(na.Outcomes)
				if err := printNodeStopOutcomes(cmd, output, na); err != nil {
					return err
				}
				if !na.OK {
					reason := na.Error
					if reason == "" {
						reason = "the node answered no reason"
					}
					return newRefusal("stop orphans on node "+na.Node+" failed", reason)
				}
				ans.Outcomes = na.Outcomes
			}
			stopped := 0
			for _, o := range ans.Outcomes {
				if o.Outcome == scaler.OutcomeStopped {
					stopped++
				}
			}
			if stopped != len(ids) || len(ans.Outcomes) != len(ids) {
				if node != "" {
					return fmt.Errorf("stop orphans on node %s: stopped %d of %d", node, stopped, len(ids))
				}
				return fmt.Errorf("stop orphans: stopped %d of %d", stopped, len(ids))
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVar(&node, "node", "", "stop the compute on cluster node `ID` (as kici-admin peers list shows it)")
	return cmd
}

// printNodeStopOutcomes writes a node's outcomes as a table after a
// "node ID:" line (nothing more when the node failed), or the API's JSON.
func printNodeStopOutcomes(cmd *cobra.Command, output string, na nodeStopAnswer) error {
	out := cmd.OutOrStdout()
	if output == formatJSON {
		return writeJSON(out, na)
	}
	fmt.Fprintf(out, "node %s:\n", escapeControls(na.Node))
	if !na.OK {
		return nil
	}
	return printStopOutcomes(cmd, output, stopOrphansAnswer{Outcomes: na.Outcomes})
}

// printStopOutcomes writes each id's outcome as a table or as the API's
// JSON.
func printStopOutcomes(cmd *cobra.Command, output string, ans stopOrphansAnswer) error {
	out := cmd.OutOrStdout()
	if output == formatJSON {
		return writeJSON(out, ans)
	}
	tw := newTable(out)
	tw.row("ID", "OUTCOME", "REASON")
	for _, o := range ans.Outcomes {
		tw.row(o.ID, o.Outcome, dash(o.Error))
	}
	return tw.flush()
}

// uniqueIDs is ids without repeats, in their first order.
func uniqueIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
