package admincli

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

func newSecretsRotateKeyCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "rotate-key",
		Short: "Re-encrypt every secret under a new key, read from stdin",
		Long: `Re-encrypt every secret under a new secret key (64 hex digits, read from
stdin), in one transaction: all secrets move to the new key, or none does.

When the orchestrator generated its key into the data dir, the new key
replaces it there. When the key comes from KICI_SECRET_KEY, set the
variable to the new key on every orchestrator before it next starts: the
old key no longer opens the secrets, and an orchestrator started with it
refuses to start. Keep the new key safe: without it the secrets are lost.`,
		Example: `  openssl rand -hex 32 > new.key && kici-admin secrets rotate-key < new.key`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			key, err := readStdinValue(a.env, "new secret key")
			if err != nil {
				return err
			}
			key = strings.TrimSpace(key)
			if b, err := hex.DecodeString(key); err != nil || len(b) != 32 {
				return usagef("the new key on stdin: want 64 hex digits (e.g. from `openssl rand -hex 32`)")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var ans apiv1.RotateKeyResponse
			if err := c.do(cmd.Context(), http.MethodPost, "/api/v1/secrets/rotate-key", nil, apiv1.RotateKeyRequest{NewKey: key}, &ans); err != nil {
				return fmt.Errorf("rotate secret key: %w", err)
			}
			out := cmd.OutOrStdout()
			if output == formatJSON {
				return writeJSON(out, ans)
			}
			fmt.Fprintf(out, "secret key rotated: %d secret(s) re-encrypted under key version %d (fingerprint %s)\n", ans.Resealed, ans.KeyVersion, ans.Fingerprint)
			if ans.Note != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "kici-admin: %s\n", ans.Note)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
