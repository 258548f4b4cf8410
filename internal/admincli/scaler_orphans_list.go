package admincli

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kici-dev/kici/internal/scaler"
)

func newScalerOrphansListCmd(a *app) *cobra.Command {
	var output string
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
and the exit status is 1.`,
		Example: `  kici-admin scaler orphans list
  kici-admin scaler orphans list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
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
	return cmd
}

// printOrphans writes the listing as a table or as the API's JSON.
func (a *app) printOrphans(cmd *cobra.Command, output string, ol orphanList) error {
	out := cmd.OutOrStdout()
	if output == formatJSON {
		for i := range ol.Compute {
			ol.Compute[i].TrackedBy = nonNil(ol.Compute[i].TrackedBy)
		}
		return writeJSON(out, ol)
	}
	if len(ol.Compute) == 0 {
		if ol.Error == "" {
			fmt.Fprintln(out, "no live scaler compute")
		}
		return nil
	}
	now := a.env.now()
	tw := newTable(out)
	tw.row("SCALER", "BACKEND", "ID", "REF", "STARTED", "STATUS", "TRACKED BY")
	orphaned, unverified := 0, 0
	for _, o := range ol.Compute {
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
		fmt.Fprintf(out, "%d orphaned; stop with: kici-admin scaler orphans stop ID...\n", orphaned)
	}
	if unverified > 0 {
		fmt.Fprintf(out, "%d unverified: its backend cannot confirm it is its own; check it by hand, it is never stopped\n", unverified)
	}
	return nil
}
