package admincli

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

func newScalerOrphansListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the scalers' live compute and whether the auto-scaler tracks each",
		Long: `List every piece of live compute (a container, an agent process) of the
scalers whose backend can list it, and whether the auto-scaler tracks it.
A tracked agent is spawning or running a job. An untracked one is an
orphan: nothing will stop it, and "kici-admin scaler orphans stop ID"
removes it.

Only this orchestrator instance's compute is listed; containers of another
orchestrator sharing the engine are never shown. When some scaler's compute
could not be listed, the rest is printed, the error follows on stderr and
the exit status is 1.`,
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
	tw.row("SCALER", "BACKEND", "AGENT ID", "REF", "STARTED", "TRACKED")
	untracked := 0
	for _, o := range ol.Compute {
		tracked := "yes"
		if !o.Tracked {
			tracked = "no"
			untracked++
		}
		// A container id is cut to 12 characters, as docker ps shows it.
		tw.row(o.Scaler, o.Backend, dash(o.AgentID), dash(shortSHA(o.Ref)), ago(now, o.Started), tracked)
	}
	if err := tw.flush(); err != nil {
		return err
	}
	if untracked > 0 {
		fmt.Fprintf(out, "%d untracked; stop with: kici-admin scaler orphans stop ID...\n", untracked)
	}
	return nil
}
