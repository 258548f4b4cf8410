package admincli

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
)

func newScalerRetryCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "retry NAME",
		Short: "Lift a scaler's deferral after failed spawns",
		Long: `After a spawn the host refused (a missing kernel, binary or image), or an
agent that died before it registered, a scaler waits before it spawns again:
30 s, doubling per failure in a row up to 15 min (KICI_SCALER_DEFER_BASE_MS,
KICI_SCALER_DEFER_MAX_MS), and after failJobsAfter failures in a row the jobs
waiting for it fail with the cause. Once the host is fixed, retry lifts the
deferral and forgets the failures: the waiting jobs are offered to the
scaler at once. "kici-admin scaler status" shows deferred_until per scaler.
A reload that changes the scaler's entry lifts its deferral too.`,
		Example: `  kici-admin scaler retry microvms`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var ans struct {
				Scaler string `json:"scaler"`
				Result string `json:"result"`
			}
			path := "/api/v1/scalers/" + url.PathEscape(args[0]) + "/retry"
			if err := c.do(cmd.Context(), http.MethodPost, path, nil, nil, &ans); err != nil {
				return scalerError("retry scaler "+args[0], err)
			}
			if output == formatJSON {
				return writeJSON(cmd.OutOrStdout(), ans)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "scaler %s: %s; the jobs waiting for it are offered to it again\n", ans.Scaler, ans.Result)
			return err
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
