package admincli

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newSourcesListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the registered sources",
		Example: `  kici-admin sources list
  kici-admin sources list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var sl apiv1.SourceList
			if err := c.do(cmd.Context(), http.MethodGet, sourcesPath(), nil, nil, &sl); err != nil {
				return fmt.Errorf("list sources: %w", err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				sl.Sources = nonNil(sl.Sources)
				return writeJSON(out, sl)
			}
			if len(sl.Sources) == 0 {
				fmt.Fprintln(out, "no sources; add one with: kici-admin sources add NAME --path DIR")
				return nil
			}
			printSources(out, a.env.now(), sl.Sources)
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printSources writes sources as a table.
func printSources(w io.Writer, now time.Time, sources []apiv1.Source) {
	tw := newTable(w)
	tw.row("NAME", "KIND", "LOCATION", "FORK PRS", "CREATED")
	for _, s := range sources {
		tw.row(s.Name, s.Kind, dash(sourceLocation(s)), dash(s.ForkPullRequests), ago(now, s.CreatedAt))
	}
	tw.flush()
}

// sourceLocation is where a source's code lives, whatever its kind, and
// the GitHub repository a local or git source mirrors.
func sourceLocation(s apiv1.Source) string {
	mirrors := ""
	if s.GitHubRepo != "" {
		mirrors = " (checks: github.com/" + s.GitHubRepo + ")"
	}
	switch {
	case s.Path != "":
		return s.Path + mirrors
	case s.URL != "":
		return s.URL + mirrors
	case s.Repo != "":
		return "github.com/" + s.Repo
	}
	return ""
}
