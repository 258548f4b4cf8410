package admincli

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// reloadRejectedPrefix starts the server's 422 message; the rest is the
// reason, one problem per line.
const reloadRejectedPrefix = "reload rejected; the running configuration is unchanged: "

func newScalerReloadCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Re-read the scaler configuration and apply it, all or nothing",
		Long: `Make the orchestrator re-read KICI_SCALER_CONFIG_PATH and its scalers.d
drop-ins, as SIGHUP does, and print what changed: the scalers added,
updated, retired (they take no new jobs and drain) and unchanged.

A configuration with any problem, or one that changes a scaler's type
(which needs a restart), is refused as a whole: the running configuration
stays, every problem is printed, and the exit status is 1.`,
		Example: `  kici-admin scaler reload
  kici-admin scaler reload -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var ans reloadAnswer
			if err := c.do(cmd.Context(), http.MethodPost, scalerReloadPath, nil, nil, &ans); err != nil {
				var ae *apiError
				if errors.As(err, &ae) && ae.StatusCode == http.StatusUnprocessableEntity {
					return newRefusal("scaler reload rejected; the running configuration is unchanged",
						strings.TrimPrefix(ae.Message, reloadRejectedPrefix))
				}
				return scalerError("reload scalers", err)
			}
			out := cmd.OutOrStdout()
			p := &ans.Plan
			p.Added, p.Updated, p.Retired, p.Unchanged = nonNil(p.Added), nonNil(p.Updated), nonNil(p.Retired), nonNil(p.Unchanged)
			if output == formatJSON {
				return writeJSON(out, ans)
			}
			fmt.Fprintln(out, "scaler configuration reloaded")
			tw := newTable(out)
			tw.row("added:", list(p.Added))
			tw.row("updated:", list(p.Updated))
			retired := list(p.Retired)
			if len(p.Retired) > 0 {
				retired += " (no new jobs; running agents finish theirs)"
			}
			tw.row("retired:", retired)
			tw.row("unchanged:", list(p.Unchanged))
			return tw.flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
