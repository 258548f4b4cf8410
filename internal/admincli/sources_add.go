package admincli

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/spf13/cobra"
)

// sourcesAddFlags are the options of `kici-admin sources add`.
type sourcesAddFlags struct {
	path          string
	gitURL        string
	github        string
	webhookSecret string
	forkPolicy    string
	githubRepo    string
	output        string
}

// forkPolicies are the values of --fork-pull-requests, the default first.
var forkPolicies = []string{"approve", "run", "ignore"}

// githubRepo is OWNER/REPO as GitHub allows the two names.
var githubRepo = regexp.MustCompile(`^[A-Za-z0-9-]+/[A-Za-z0-9._-]+$`)

func newSourcesAddCmd(a *app) *cobra.Command {
	var f sourcesAddFlags
	cmd := &cobra.Command{
		Use:   "add NAME (--path DIR | --git-url URL | --github OWNER/REPO) [--github-repo OWNER/REPO] [--webhook-secret S] [--fork-pull-requests approve|run|ignore]",
		Short: "Register a repository as a source",
		Long: `Register a repository under NAME, from exactly one of:

  --path DIR           a directory on the orchestrator's machine (kind local);
                       a relative DIR is made absolute here first
  --git-url URL        a clone URL: https://, http://, ssh://, git:// or
                       user@host:path (kind git); others (ext::, -…) are refused,
                       and file:// too unless the orchestrator allows it
                       (KICI_GIT_ALLOW_FILE_URLS; use --path for this host)
  --github OWNER/REPO  a GitHub repository (kind github)

--github-repo OWNER/REPO ties a local or git source to the GitHub
repository it mirrors. Runs of a github source, or of a source with
--github-repo, are reported to that repository as check runs (one per
run) when the orchestrator has GitHub credentials (KICI_GITHUB_TOKEN, or
KICI_GITHUB_APP_ID and KICI_GITHUB_APP_KEY_FILE; see docs/sources.md).

--webhook-secret is the HMAC secret that signs deliveries to
/webhooks/github/NAME (GitHub's, for a source of any kind) or
/webhooks/generic/NAME (kici's generic payload). The server keeps it and
never shows it again.

--fork-pull-requests says what a pull request from a fork does. Its runs
always use the workflows of the pull request's base commit, never the
fork's, on the fork's code; then:

  approve  (the default) each run waits with status awaiting_approval until
           an owner or admin runs kici-admin runs approve ID, which starts
           it with the source's secrets
  run      each run starts at once without secrets (a declared secret
           reads empty)
  ignore   nothing starts`,
		Example: `  kici-admin sources add hello --path examples/hello
  kici-admin sources add app --github kici-dev/app --webhook-secret "$SECRET"
  kici-admin sources add lib --git-url https://git.example.com/lib.git -o json
  kici-admin sources add mirror --git-url https://git.example.com/app.git --github-repo kici-dev/app
  kici-admin sources add oss --github kici-dev/oss --webhook-secret "$SECRET" --fork-pull-requests run`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			src, err := f.source(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var created apiv1.Source
			if err := c.do(cmd.Context(), http.MethodPost, sourcesPath(), nil, src, &created); err != nil {
				return fmt.Errorf("create source %q: %w", src.Name, err)
			}
			out := cmd.OutOrStdout()
			if f.output == formatJSON {
				return writeJSON(out, created)
			}
			printSources(out, a.env.now(), []apiv1.Source{created})
			if hook := webhookPath(created); hook != "" {
				fmt.Fprintf(out, "webhook: POST %s on the orchestrator's public URL\n", hook)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.path, "path", "", "a directory `DIR` on the orchestrator's machine (kind local)")
	fl.StringVar(&f.gitURL, "git-url", "", "a git remote `URL` the orchestrator clones (kind git)")
	fl.StringVar(&f.github, "github", "", "a GitHub repository as `OWNER/REPO` (kind github)")
	fl.StringVar(&f.webhookSecret, "webhook-secret", "", "HMAC `SECRET` of webhook deliveries for this source")
	fl.StringVar(&f.githubRepo, "github-repo", "", "report this local or git source's runs as check runs to the GitHub repository `OWNER/REPO` it mirrors")
	fl.StringVar(&f.forkPolicy, "fork-pull-requests", "", "what a pull request from a fork does: `POLICY` approve (default), run (without secrets) or ignore")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// source builds the request from the flags: exactly one location.
func (f *sourcesAddFlags) source(name string) (apiv1.Source, error) {
	src := apiv1.Source{Name: name, WebhookSecret: f.webhookSecret, ForkPullRequests: f.forkPolicy, GitHubRepo: f.githubRepo}
	if name == "" {
		return src, usagef("NAME must not be empty")
	}
	if f.forkPolicy != "" && !slices.Contains(forkPolicies, f.forkPolicy) {
		return src, usagef("--fork-pull-requests %q: want one of %s", f.forkPolicy, strings.Join(forkPolicies, ", "))
	}
	set := 0
	for _, v := range []string{f.path, f.gitURL, f.github} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return src, usagef("give exactly one of --path, --git-url and --github")
	}
	switch {
	case f.path != "":
		abs, err := filepath.Abs(f.path)
		if err != nil {
			return src, fmt.Errorf("make --path %q absolute: %w", f.path, err)
		}
		src.Kind, src.Path = "local", abs
	case f.gitURL != "":
		src.Kind, src.URL = "git", f.gitURL
	default:
		if !githubRepo.MatchString(f.github) {
			return src, usagef("--github %q: want OWNER/REPO", f.github)
		}
		src.Kind, src.Repo = "github", f.github
	}
	if f.githubRepo != "" {
		if src.Kind == "github" {
			return src, usagef("--github-repo is for --path and --git-url sources: a --github source reports to its own repository")
		}
		if !githubRepo.MatchString(f.githubRepo) {
			return src, usagef("--github-repo %q: want OWNER/REPO", f.githubRepo)
		}
	}
	return src, nil
}

// webhookPath is where the orchestrator takes deliveries for a source
// that can be told about pushes.
func webhookPath(s apiv1.Source) string {
	switch s.Kind {
	case "github":
		return "/webhooks/github/" + s.Name
	case "git":
		return "/webhooks/generic/" + s.Name
	}
	return ""
}
