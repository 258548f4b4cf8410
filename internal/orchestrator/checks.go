package orchestrator

import (
	"fmt"
	"os"

	"github.com/kici-dev/kici/internal/checks"
)

// maxAppKeyBytes bounds the GitHub App private key file read.
const maxAppKeyBytes = 64 << 10

// buildChecks makes the GitHub check run reporter when a token or a
// GitHub App is configured; without either, runs are not reported.
func (s *Server) buildChecks() error {
	cfg := checks.Config{APIURL: s.cfg.GitHubAPIURL, Token: s.cfg.GitHubToken, AppID: s.cfg.GitHubAppID, PublicURL: s.cfg.PublicURL}
	if cfg.AppID == 0 && cfg.Token == "" {
		s.log.Info("runs are not reported to GitHub: set KICI_GITHUB_TOKEN, or KICI_GITHUB_APP_ID and KICI_GITHUB_APP_KEY_FILE")
		return nil
	}
	auth := "token"
	if cfg.AppID != 0 {
		st, err := os.Stat(s.cfg.GitHubAppKeyFile)
		if err != nil {
			return fmt.Errorf("KICI_GITHUB_APP_KEY_FILE: %w", err)
		}
		if st.Size() > maxAppKeyBytes {
			return fmt.Errorf("KICI_GITHUB_APP_KEY_FILE: %q has %d bytes, more than a private key's %d", s.cfg.GitHubAppKeyFile, st.Size(), maxAppKeyBytes)
		}
		if cfg.AppKey, err = os.ReadFile(s.cfg.GitHubAppKeyFile); err != nil {
			return fmt.Errorf("KICI_GITHUB_APP_KEY_FILE: %w", err)
		}
		auth = "github_app"
	}
	r, err := checks.New(s.log, s.db, cfg)
	if err != nil {
		return err
	}
	s.checks = r
	s.log.Info("runs are reported to GitHub as check runs", "auth", auth, "api_url", or(cfg.APIURL, checks.DefaultAPIURL))
	return nil
}
