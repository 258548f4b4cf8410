package admincli

import (
	"fmt"
	"net/http"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// tokenState is "active", "revoked" or "expired".
func tokenState(now time.Time, revoked, expires *time.Time) string {
	switch {
	case revoked != nil:
		return "revoked"
	case expires != nil && !expires.After(now):
		return "expired"
	}
	return "active"
}

// expiry prints when a token expires: an absolute UTC time, or "never".
func expiry(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.DateTime) + " UTC"
}

func newTokensListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the admin tokens: name, role, creator, last use (never the tokens)",
		Example: `  kici-admin tokens list
  kici-admin tokens list -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var tl apiv1.AdminTokenList
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/tokens", nil, nil, &tl); err != nil {
				return fmt.Errorf("list admin tokens: %w", err)
			}
			out := cmd.OutOrStdout()
			tl.Tokens = nonNil(tl.Tokens)
			if output == formatJSON {
				return writeJSON(out, tl)
			}
			if len(tl.Tokens) == 0 {
				fmt.Fprintln(out, "no admin tokens (only KICI_BOOTSTRAP_ADMIN_TOKEN, if set, works)")
				return nil
			}
			now := a.env.now()
			tw := newTable(out)
			tw.row("ID", "NAME", "ROLE", "PREFIX", "STATE", "CREATED BY", "CREATED", "LAST USED", "EXPIRES")
			for _, t := range tl.Tokens {
				tw.row(t.ID, t.Name, t.Role, dash(t.Prefix)+"…", tokenState(now, t.RevokedAt, t.ExpiresAt), dash(t.CreatedBy),
					ago(now, t.CreatedAt), agoPtr(now, t.LastUsedAt), expiry(t.ExpiresAt))
			}
			return tw.flush()
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
