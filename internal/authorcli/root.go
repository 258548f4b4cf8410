package authorcli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit statuses of the kici command.
const (
	exitOK      = 0
	exitInvalid = 1 // the workflows are invalid, or the operation failed
	exitUsage   = 2 // bad command line
)

// usageError marks an error in the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// reportedError marks a failure whose details were already printed.
var errReported = errors.New("reported")

// Main runs the kici command and returns its exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errReported):
		return exitInvalid
	}
	var ue usageError
	fmt.Fprintf(stderr, "kici: %v\n", err)
	if errors.As(err, &ue) || isCobraUsage(err) {
		return exitUsage
	}
	return exitInvalid
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kici",
		Short: "Validate, compile, preview and run kici workflows",
		Long: `kici is the workflow author's tool. It reads the workflow files of a
repository (.kici/workflows/*.yml) exactly as the orchestrator does, so a
workflow that passes "kici validate" is one the orchestrator will run.

DIR is the repository root and defaults to the current directory.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newValidateCmd(), newCompileCmd(), newPreviewCmd(), newRunCmd())
	return root
}

// isCobraUsage recognises cobra's own argument and command errors, which it
// does not type.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand"} {
		if len(msg) >= len(p) && contains(msg, p) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func dirArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return "."
}
