package authorcli

import (
	"errors"
	"fmt"

	"github.com/kici-dev/kici/internal/workflow"
	"github.com/spf13/cobra"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Check every workflow of a repository",
		Long: `Check every workflow file under DIR/.kici/workflows.

Exits 0 when all are valid. Otherwise prints every problem of every file as
FILE:LINE:COL: message and exits 1.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			plan, err := workflow.CompileDir(dirArg(args))
			if err != nil {
				return printCompileError(cmd, err)
			}
			jobs := 0
			for _, wf := range plan.Workflows {
				jobs += len(wf.Jobs)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d workflow(s), %d job(s): ok\n", len(plan.Workflows), jobs)
			return nil
		},
	}
}

// printCompileError prints a compile failure on stderr, one problem per
// line, and returns errReported.
func printCompileError(cmd *cobra.Command, err error) error {
	var list workflow.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintln(cmd.ErrOrStderr(), e.Error())
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%d problem(s) found\n", len(list))
		return errReported
	}
	return err
}
