package admincli

import (
	"fmt"
	"io"
	"net/http"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// diagnosePath is the orchestrator's self-check.
const diagnosePath = "/api/v1/diagnose"

func newDiagnoseCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Check the orchestrator's database, disk, keys and scaler backends; print each fix",
		Long: `Ask the orchestrator to check what it depends on, where its data lives:
the database (reachable, and its ping time), the migrations (at head),
free space in KICI_DATA_DIR (fails under 1 GiB or 5%), the secret key
(loaded and matching the key check stored in the database), the job-token
key file, and each configured scaler: for bare-metal, each label set's
binaryPath exists and is executable; for container, the engine answers
and each label set's image is present locally.

One line per check: "PASS name: detail", or "FAIL name: detail — fix: ..."
with what to do. Exit status 0 when every check passes, 1 otherwise
(with -o json too).`,
		Example: `  kici-admin diagnose
  kici-admin diagnose -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var d apiv1.Diagnosis
			if err := c.do(cmd.Context(), http.MethodGet, diagnosePath, nil, nil, &d); err != nil {
				return fmt.Errorf("diagnose: %w", err)
			}
			d.Checks = nonNil(d.Checks)
			out := cmd.OutOrStdout()
			if output == formatJSON {
				if err := writeJSON(out, d); err != nil {
					return err
				}
			} else if err := printChecks(out, d.Checks); err != nil {
				return err
			}
			for _, ch := range d.Checks {
				if !ch.OK {
					return errSilent
				}
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printChecks writes one line per check, then a summary when some failed.
func printChecks(w io.Writer, checks []apiv1.DiagnoseCheck) error {
	failed := 0
	for _, ch := range checks {
		var err error
		if ch.OK {
			_, err = fmt.Fprintf(w, "PASS %s: %s\n", ch.Name, ch.Detail)
		} else {
			failed++
			_, err = fmt.Fprintf(w, "FAIL %s: %s — fix: %s\n", ch.Name, ch.Detail, dash(ch.Fix))
		}
		if err != nil {
			return err
		}
	}
	if failed > 0 {
		_, err := fmt.Fprintf(w, "\n%d of %d checks failed\n", failed, len(checks))
		return err
	}
	return nil
}
