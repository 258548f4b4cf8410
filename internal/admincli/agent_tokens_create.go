package admincli

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// agentTokensCreateFlags are the options of `kici-admin agent-tokens create`.
type agentTokensCreateFlags struct {
	labels    []string
	expiresIn string
	output    string
}

func newAgentTokensCreateCmd(a *app) *cobra.Command {
	var f agentTokensCreateFlags
	cmd := &cobra.Command{
		Use:   "create --labels L1,L2",
		Short: "Create an agent token; it is shown only this once",
		Long: `Create a token an agent connects with (its KICI_AGENT_TOKEN), for an agent
with the given labels: the agent may register only labels the token allows
(besides the kici:os: and kici:arch: labels every agent adds), and is
refused with close code 4003 otherwise. The token is printed only this
once: store it now. A reminder goes to stderr, so stdout holds only the
answer.`,
		Example: `  kici-admin agent-tokens create --labels linux,docker
  kici-admin agent-tokens create --labels linux --expires-in 30d -o json | jq -r .token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if len(f.labels) == 0 {
				return usagef("--labels is required: the labels of the agent that will use the token")
			}
			for _, l := range f.labels {
				if strings.TrimSpace(l) == "" {
					return usagef("--labels %q: a label is empty", strings.Join(f.labels, ","))
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var tok apiv1.AgentToken
			req := apiv1.AgentTokenRequest{Labels: f.labels, ExpiresIn: f.expiresIn}
			if err := c.do(cmd.Context(), http.MethodPost, "/api/v1/agent-tokens", nil, req, &tok); err != nil {
				return fmt.Errorf("create agent token: %w", err)
			}
			tok.Labels = nonNil(tok.Labels)
			out := cmd.OutOrStdout()
			if f.output == formatJSON {
				if err := writeJSON(out, tok); err != nil {
					return err
				}
			} else {
				tw := newTable(out)
				tw.row("id:", tok.ID)
				tw.row("labels:", list(tok.Labels))
				tw.row("expires:", expiry(tok.ExpiresAt))
				tw.row("token:", tok.Token)
				if err := tw.flush(); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "kici-admin: this token will not be shown again; store it now (the agent reads it from KICI_AGENT_TOKEN)")
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&f.labels, "labels", nil, "`LABELS` of the agent that will use the token, comma-separated or repeated")
	cmd.Flags().StringVar(&f.expiresIn, "expires-in", "", "`DURATION` after which the token stops working and its agents are disconnected, e.g. 720h or 30d (default never)")
	addOutputFlag(cmd, &f.output)
	return cmd
}
