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

// secretScope is where a secret belongs: a source, an environment, or
// neither (every source).
type secretScope struct{ source, environment string }

func (s *secretScope) flags(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVar(&s.source, "source", "", "`SOURCE` whose jobs alone "+verb+" (default every source)")
	cmd.Flags().StringVar(&s.environment, "environment", "", "`ENV`ironment whose jobs alone "+verb+" (a job names it with environment:)")
}

// query is ?source=S or ?environment=E, or nothing for every source.
func (s secretScope) query() (url.Values, error) {
	switch {
	case s.source != "" && s.environment != "":
		return nil, usagef("give --source or --environment, not both: a secret belongs to one scope")
	case s.environment != "":
		return url.Values{"environment": {s.environment}}, nil
	case s.source != "":
		return url.Values{"source": {s.source}}, nil
	}
	return nil, nil
}

// name is how the output names a secret.
func (s secretScope) name(name string) string {
	switch {
	case s.environment != "":
		return fmt.Sprintf("%s (environment %s)", name, s.environment)
	case s.source != "":
		return fmt.Sprintf("%s (source %s)", name, s.source)
	}
	return name
}

func newSecretsSetCmd(a *app) *cobra.Command {
	var scope secretScope
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
wins over a secret of the same name for every source. With --environment
it is only for the jobs that name that environment (environment: NAME),
and wins over both; a job without the environment never receives it.`,
		Example: `  printf %s "$DEPLOY_TOKEN" | kici-admin secrets set DEPLOY_TOKEN
  kici-admin secrets set NPM_TOKEN --source web < npm-token.txt
  kici-admin secrets set DEPLOY_KEY --environment production < deploy.key`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return usagef("NAME is empty")
			}
			q, err := scope.query()
			if err != nil {
				return err
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
			err = c.do(cmd.Context(), http.MethodPut, "/api/v1/secrets/"+url.PathEscape(name), q, apiv1.SecretRequest{Value: value}, &sec)
			if err != nil {
				return fmt.Errorf("set secret %s: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s set (%d bytes)\n", scope.name(name), len(value))
			return nil
		},
	}
	scope.flags(cmd, "may receive the secret")
	return cmd
}
