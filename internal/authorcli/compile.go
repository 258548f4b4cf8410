package authorcli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kici-dev/kici/internal/workflow"
	"github.com/spf13/cobra"
)

func newCompileCmd() *cobra.Command {
	var write bool
	cmd := &cobra.Command{
		Use:   "compile [DIR]",
		Short: "Print the JSON plan of a repository's workflows",
		Long: `Compile every workflow under DIR/.kici/workflows and print the JSON plan
on stdout. With --write, write it to DIR/` + workflow.LockPath + ` instead;
the orchestrator then reads that file rather than compiling the YAML itself,
and refuses it once it was written by a kici with another plan schema.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := dirArg(args)
			plan, err := workflow.CompileDir(dir)
			if err != nil {
				return printCompileError(cmd, err)
			}
			data, err := plan.Marshal()
			if err != nil {
				return err
			}
			if !write {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			dst := filepath.Join(dir, filepath.FromSlash(workflow.LockPath))
			if err := writeFileAtomic(dst, data); err != nil {
				return fmt.Errorf("write %s: %w", dst, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", dst)
			return nil
		},
	}
	cmd.Flags().BoolVar(&write, "write", false, "write the plan to "+workflow.LockPath+" instead of stdout")
	return cmd
}

// writeFileAtomic writes through a temporary file and a rename, so a crash
// never leaves a half-written lock file behind.
func writeFileAtomic(dst string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".kici-lock-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
