package admincli

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kici-dev/kici/internal/scaler"
)

func newScalerOrphansListCmd(a *app) *cobra.Command {
	var output, node string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the scalers' live compute, tracked or not, and what tracks it",
		Long: `List every piece of live compute (a container, an agent process, a
microVM) of the scalers whose backend can list it, tracked or not, with its
status and what tracks it.

STATUS is one of:
  tracked     something holds it (TRACKED BY says what); it is never stopped
  orphaned    nothing tracks it: "kici-admin scaler orphans stop ID" removes it
  unverified  nothing tracks it, but its backend cannot confirm it is its
              own (a process id now another's, say); it is never stopped

TRACKED BY lists: spawning (a spawn not registered yet, one adopted after a
restart included), registered (an agent the auto-scaler spawned that has
registered, or any agent connected to the orchestrator) and bound-job (a
job not ended is dispatched to the agent or waits for it to come back).

Only this orchestrator instance's compute is listed; containers of another
orchestrator sharing the engine are never shown. When some scaler's compute
could not be listed, or what tracks compute could not be read (everything
then shows as tracked), the rest is printed, the error follows on stderr
and the exit status is 1.

In a cluster, ask the coordinator with --node ID for the compute of one
node: the coordinator itself or a worker connected to it, by its id as
"kici-admin peers list" shows it. The table follows a "node ID:" line. A
node without scalers lists nothing. --node all asks every node at once and
prints a block per node, the coordinator first; a node that cannot answer
(a worker that is gone, or whose scalers failed) gets its error in its
block and the others are printed all the same. The exit status is 1 when
any node failed. -o json prints the API's answer as it is:
{"node", "ok", "error"?, "compute"} per node, under "nodes" for all.`,
		Example: `  kici-admin scaler orphans list
  kici-admin scaler orphans list -o json
  kici-admin scaler orphans list --node ci-2
  kici-admin scaler orphans list --node all`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if cmd.Flags().Changed("node") {
				if err := checkNodeFlag(node, true); err != nil {
					return err
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			switch node {
			case "":
			case nodeAll:
				var all allNodesOrphanList
				if err := c.do(cmd.Context(), http.MethodGet, orphansPath, url.Values{"node": {node}}, nil, &all); err != nil {
					return scalerError("list orphans", err)
				}
				return a.printAllNodesOrphans(cmd, output, all)
			default:
				var nl nodeOrphanList
				if err := c.do(cmd.Context(), http.MethodGet, orphansPath, url.Values{"node": {node}}, nil, &nl); err != nil {
					return scalerError("list orphans on node "+node, err)
				}
				if nl.Node == "" {
					nl.Node = node
				}
				return a.printNodeOrphans(cmd, output, nl)
			}
			var ol orphanList
			if err := c.do(cmd.Context(), http.MethodGet, orphansPath, nil, nil, &ol); err != nil {
				return scalerError("list orphans", err)
			}
			ol.Compute = nonNil(ol.Compute)
			if err := a.printOrphans(cmd, output, ol); err != nil {
				return err
			}
			if ol.Error != "" {
				return newRefusal("list orphans: the list is incomplete", ol.Error)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVar(&node, "node", "", "list the compute of cluster node `ID` (as kici-admin peers list shows it), or of every node with all")
	return cmd
}

// printOrphans writes the listing as a table or as the API's JSON.
func (a *app) printOrphans(cmd *cobra.Command, output string, ol orphanList) error {
	out := cmd.OutOrStdout()
	if output == formatJSON {
		nonNilTrackedBy(ol.Compute)
		return writeJSON(out, ol)
	}
	return printOrphanTable(out, a.env.now(), ol.Compute, ol.Error != "", "kici-admin scaler orphans stop ID...")
}

// printNodeOrphans writes one node's listing, as a table after a "node
// ID:" line or as the API's JSON; a node that failed is refused after.
func (a *app) printNodeOrphans(cmd *cobra.Command, output string, nl nodeOrphanList) error {
	out := cmd.OutOrStdout()
	nl.Compute = nonNil(nl.Compute)
	if output == formatJSON {
		nonNilTrackedBy(nl.Compute)
		if err := writeJSON(out, nl); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "node %s:\n", escapeControls(nl.Node))
		if err := printOrphanTable(out, a.env.now(), nl.Compute, !nl.OK, stopHint(nl.Node)); err != nil {
			return err
		}
	}
	return nodeListFailure(nl)
}

// nodeListFailure is the refusal of a node that failed, nil for one
// that answered.
func nodeListFailure(nl nodeOrphanList) error {
	if nl.OK {
		return nil
	}
	reason := nl.Error
	if reason == "" {
		reason = "the node answered no reason"
	}
	if len(nl.Compute) > 0 {
		return newRefusal("list orphans on node "+nl.Node+": the list is incomplete", reason)
	}
	return newRefusal("list orphans on node "+nl.Node+" failed", reason)
}

// printAllNodesOrphans writes every node's listing, a block per node
// (its table, or its error), or the API's JSON; the exit status is 1 when
// any node failed.
func (a *app) printAllNodesOrphans(cmd *cobra.Command, output string, all allNodesOrphanList) error {
	out := cmd.OutOrStdout()
	all.Nodes = nonNil(all.Nodes)
	failed := 0
	for i := range all.Nodes {
		all.Nodes[i].Compute = nonNil(all.Nodes[i].Compute)
		nonNilTrackedBy(all.Nodes[i].Compute)
		if !all.Nodes[i].OK {
			failed++
		}
	}
	if output == formatJSON {
		if err := writeJSON(out, all); err != nil {
			return err
		}
	} else {
		now := a.env.now()
		for i, nl := range all.Nodes {
			if i > 0 {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "node %s:\n", escapeControls(nl.Node))
			if err := printOrphanTable(out, now, nl.Compute, !nl.OK, stopHint(nl.Node)); err != nil {
				return err
			}
			if !nl.OK {
				printNodeError(out, nl.Error)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("list orphans: %d of %d nodes failed", failed, len(all.Nodes))
	}
	return nil
}

// printNodeError writes a node's error under its block: "error: " and
// the first line, the others indented below.
func printNodeError(out io.Writer, reason string) {
	if strings.TrimSpace(reason) == "" {
		reason = "the node answered no reason"
	}
	prefix := "error: "
	for line := range strings.Lines(reason) {
		if line = strings.TrimRight(line, "\r\n"); strings.TrimSpace(line) == "" {
			continue
		}
		fmt.Fprintln(out, prefix+escapeControls(line))
		prefix = "  "
	}
}

// stopHint is the command that stops the orphans of node.
func stopHint(node string) string {
	return "kici-admin scaler orphans stop --node " + escapeControls(node) + " ID..."
}

// nonNilTrackedBy gives each compute a TrackedBy that encodes as [].
func nonNilTrackedBy(compute []scaler.Orphan) {
	for i := range compute {
		compute[i].TrackedBy = nonNil(compute[i].TrackedBy)
	}
}

// printOrphanTable writes the table of compute with the counts of the
// orphaned and the unverified, stopHint saying how to stop the former;
// an empty list says so unless failed (its error follows).
func printOrphanTable(out io.Writer, now time.Time, compute []scaler.Orphan, failed bool, stopHint string) error {
	if len(compute) == 0 {
		if !failed {
			fmt.Fprintln(out, "no live scaler compute")
		}
		return nil
	}
	tw := newTable(out)
	tw.row("SCALER", "BACKEND", "ID", "REF", "STARTED", "STATUS", "TRACKED BY")
	orphaned, unverified := 0, 0
	for _, o := range compute {
		switch o.Status {
		case scaler.ComputeOrphaned:
			orphaned++
		case scaler.ComputeUnverified:
			unverified++
		}
		// A container id is cut to 12 characters, as docker ps shows it.
		tw.row(o.Scaler, o.Backend, dash(o.ID), dash(shortSHA(o.Ref)), ago(now, o.Started), dash(o.Status), dash(strings.Join(o.TrackedBy, ",")))
	}
	if err := tw.flush(); err != nil {
		return err
	}
	if orphaned > 0 {
		fmt.Fprintf(out, "%d orphaned; stop with: %s\n", orphaned, stopHint)
	}
	if unverified > 0 {
		fmt.Fprintf(out, "%d unverified: its backend cannot confirm it is its own; check it by hand, it is never stopped\n", unverified)
	}
	return nil
}
