package admincli

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// maxSecretValue is the largest value the orchestrator accepts.
const maxSecretValue = 64 << 10

// readStdinValue reads a secret value from stdin: without echo after a
// prompt on stderr when stdin is a terminal, else all of it (one trailing
// newline dropped, so `echo VALUE |` works). It never prints the value.
func readStdinValue(e *env, prompt string) (string, error) {
	var raw []byte
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(e.stderr, "%s: ", prompt)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", fmt.Errorf("read %s from the terminal: %w", prompt, err)
		}
		raw = b
	} else {
		b, err := io.ReadAll(io.LimitReader(e.stdin, maxSecretValue+3))
		if err != nil {
			return "", fmt.Errorf("read %s from stdin: %w", prompt, err)
		}
		raw = b
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	switch {
	case v == "":
		return "", usagef("no %s on stdin (pipe it in, e.g. `printf %%s \"$VALUE\" | kici-admin …`)", prompt)
	case len(v) > maxSecretValue:
		return "", usagef("%s on stdin is over %d bytes", prompt, maxSecretValue)
	}
	return v, nil
}

// secretQuery is ?source=S, or nothing for a secret of every source.
func secretQuery(source string) url.Values {
	if source == "" {
		return nil
	}
	return url.Values{"source": {source}}
}

// secretName is how the output names a secret.
func secretName(name, source string) string {
	if source == "" {
		return name
	}
	return fmt.Sprintf("%s (source %s)", name, source)
}

func newSecretsSetCmd(a *app) *cobra.Command {
	var source string
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Set a secret; the value is read from stdin",
		Long: `Set the secret NAME to the value on stdin, creating it or replacing its value.
On a terminal the value is read without echo; from a pipe one trailing
newline is dropped. The value never appears in an argument, the output or
the orchestrator's logs.

A job receives a secret, as the environment variable NAME, only when its
workflow declares it (secrets: [NAME]); its value is masked as *** in the
job's logs. With --source the secret is only for that source's jobs, and
wins over a secret of the same name for every source.`,
		Example: `  printf %s "$DEPLOY_TOKEN" | kici-admin secrets set DEPLOY_TOKEN
  kici-admin secrets set NPM_TOKEN --source web < npm-token.txt`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return usagef("NAME is empty")
			}
			value, err := readStdinValue(a.env, "secret value")
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var sec apiv1.Secret
			err = c.do(cmd.Context(), http.MethodPut, "/api/v1/secrets/"+url.PathEscape(name), secretQuery(source), apiv1.SecretRequest{Value: value}, &sec)
			if err != nil {
				return fmt.Errorf("set secret %s: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s set (%d bytes)\n", secretName(name, source), len(value))
			return nil
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "`SOURCE` whose jobs alone may receive the secret (default every source)")
	return cmd
}
