package admincli

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kici-dev/kici/internal/scaler"
	"github.com/spf13/cobra"
)

func newScalerStatusCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each scaler: its agents, spawns, label sets, deferral and last error",
		Long: `Show every scaler of the orchestrator's auto-scaler: its agents alive or
spawning out of maxAgents, the spawns not yet registered, its label sets,
whether it is deferred after a refused launch (and until when), and whether
it is retiring (removed by a reload, draining its agents). Each scaler's
last spawn error follows the table.

An orchestrator without an auto-scaler (no KICI_SCALER_CONFIG_PATH) is
reported in one line; -o json then shows "configured": false.`,
		Example: `  kici-admin scaler status
  kici-admin scaler status -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var sl scalerList
			if err := c.do(cmd.Context(), http.MethodGet, scalersPath, nil, nil, &sl); err != nil {
				return scalerError("show scalers", err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				sl.Scalers = nonNil(sl.Scalers)
				return writeJSON(out, sl)
			}
			switch {
			case !sl.Configured:
				fmt.Fprintln(out, errNoScaler)
				return nil
			case len(sl.Scalers) == 0:
				fmt.Fprintln(out, "the auto-scaler runs, but its configuration lists no scalers")
				return nil
			}
			return printScalers(out, a.env.now(), sl.Scalers)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printScalers writes the status table, then each scaler's last error.
func printScalers(w io.Writer, now time.Time, scalers []scaler.ScalerStatus) error {
	tw := newTable(w)
	tw.row("NAME", "TYPE", "AGENTS", "SPAWNING", "LABEL SETS", "DEFERRED", "RETIRING")
	for _, s := range scalers {
		sets := make([]string, 0, len(s.LabelSets))
		for _, ls := range s.LabelSets {
			sets = append(sets, list(ls))
		}
		deferred := "-"
		if s.DeferredTo != nil {
			deferred = "until " + s.DeferredTo.UTC().Format("15:04:05Z") + " (" + until(now, *s.DeferredTo) + ")"
		}
		retiring := "no"
		if s.Retiring {
			retiring = "yes"
		}
		tw.row(s.Name, s.Type, fmt.Sprintf("%d/%d", s.Active, s.MaxAgents), strconv.Itoa(s.Spawning),
			dash(strings.Join(sets, "; ")), deferred, retiring)
	}
	if err := tw.flush(); err != nil {
		return err
	}
	first := true
	for _, s := range scalers {
		for _, c := range s.Checks {
			if c.Status == "pass" {
				continue
			}
			if first {
				fmt.Fprintln(w, "\nhost checks:")
				first = false
			}
			fmt.Fprintf(w, "  %s: %s %s: %s\n", s.Name, strings.ToUpper(c.Status), c.Name, c.Detail)
			if c.Fix != "" {
				fmt.Fprintf(w, "    fix: %s\n", c.Fix)
			}
		}
	}
	first = true
	for _, s := range scalers {
		if s.LastError == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nlast errors:")
			first = false
		}
		for i, line := range strings.Split(strings.TrimRight(s.LastError, "\n"), "\n") {
			if i == 0 {
				fmt.Fprintf(w, "  %s: %s\n", s.Name, line)
			} else {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
	return nil
}

// until is how far t lies ahead of now ("in 4m30s"); "now" once it is
// reached.
func until(now, t time.Time) string {
	d := t.Sub(now)
	if d < time.Second {
		return "now"
	}
	return "in " + duration(d)
}
