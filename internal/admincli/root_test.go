package admincli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestRoot(t *testing.T) {
	t.Parallel()
	runGolden(t, []goldenCase{
		{name: "help", args: []string{"--help"}, code: 0},
		{name: "unknown-command", args: []string{"rnus", "list"}, code: 2},
		{name: "unknown-subcommand", args: []string{"runs", "lst"}, code: 2},
		{name: "group-help", args: []string{"runs"}, code: 0},
		{name: "unknown-flag", args: []string{"runs", "list", "--nope"}, code: 2},
		{name: "bad-timeout", args: []string{"--timeout", "-1s", "queue", "list"}, code: 2},
	})
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		shell string
		want  string
	}{
		{name: "bash", shell: "bash", want: "bash completion"},
		{name: "zsh", shell: "zsh", want: "#compdef kici-admin"},
		{name: "fish", shell: "fish", want: "complete -c kici-admin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runCLI(t.Context(), []string{"completion", tt.shell}, nil)
			if code != 0 {
				t.Fatalf("exit status: got %d, want 0 (stderr %q)", code, stderr)
			}
			if !strings.Contains(stdout, tt.want) {
				t.Errorf("got a script without %q", tt.want)
			}
		})
	}
}

// walk calls fn for cmd and every command below it, with the default help
// and completion commands in place.
func walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, c := range cmd.Commands() {
		walk(c, fn)
	}
}

func testRoot() *cobra.Command {
	root := newRoot(&app{env: &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// TestEveryFlagHasHelp walks the command tree (STYLE rule 21): every
// command says what it does and every flag has a usage text.
func TestEveryFlagHasHelp(t *testing.T) {
	t.Parallel()
	walk(testRoot(), func(c *cobra.Command) {
		if c.Short == "" {
			t.Errorf("command %q has no short description", c.CommandPath())
		}
		check := func(f *pflag.Flag) {
			if strings.TrimSpace(f.Usage) == "" {
				t.Errorf("flag --%s of %q has no help text", f.Name, c.CommandPath())
			}
		}
		c.LocalFlags().VisitAll(check)
		c.InheritedFlags().VisitAll(check)
	})
}

// TestGlobalFlagsNameTheirVariables: a global flag that a variable
// also sets says which, so --help documents the environment.
func TestGlobalFlagsNameTheirVariables(t *testing.T) {
	t.Parallel()
	root := testRoot()
	for flag, variable := range map[string]string{"url": envURL, "token": envToken} {
		f := root.PersistentFlags().Lookup(flag)
		if f == nil {
			t.Errorf("no global flag --%s", flag)
			continue
		}
		if !strings.Contains(f.Usage, "$"+variable) {
			t.Errorf("--%s help %q: want it to name $%s", flag, f.Usage, variable)
		}
	}
}

// TestDocsCoverEveryCommand: docs/admin.md shows every command and each
// of its flags.
func TestDocsCoverEveryCommand(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "admin.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	walk(testRoot(), func(c *cobra.Command) {
		if !c.Runnable() || c.HasSubCommands() || c.Name() == "help" || c.HasParent() && c.Parent().Name() == "completion" || c.Hidden {
			return
		}
		if !strings.Contains(text, c.CommandPath()) {
			t.Errorf("docs/admin.md does not mention %q", c.CommandPath())
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(text, "--"+f.Name) {
				t.Errorf("docs/admin.md does not mention --%s of %q", f.Name, c.CommandPath())
			}
		})
	})
}

// TestRequests checks what each command sends: method, path, query and
// the JSON body.
func TestRequests(t *testing.T) {
	t.Parallel()
	abs, err := filepath.Abs("examples/hello")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		// want are the requests sent, in order.
		want []fakeRequest
	}{
		{
			name: "sources add makes a relative path absolute",
			args: []string{"sources", "add", "hello2", "--path", "examples/hello"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/sources", Body: map[string]any{"name": "hello2", "kind": "local", "path": abs, "created_at": "0001-01-01T00:00:00Z"}}},
		},
		{
			name: "sources add github sends the webhook secret",
			args: []string{"sources", "add", "app2", "--github", "kici-dev/app2", "--webhook-secret", "s3cret"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/sources", Body: map[string]any{"name": "app2", "kind": "github", "repo": "kici-dev/app2", "webhook_secret": "s3cret", "created_at": "0001-01-01T00:00:00Z"}}},
		},
		{
			name: "sources remove escapes the name",
			args: []string{"sources", "remove", "a b/c"},
			want: []fakeRequest{{Method: "DELETE", Path: "/api/v1/sources/a%20b%2Fc"}},
		},
		{
			name: "trigger sends event, ref and sha",
			args: []string{"trigger", "hello", "--event", "tag", "--ref", "v1.2.0", "--sha", "abc123"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/sources/hello/trigger", Body: map[string]any{"event": "tag", "ref": "v1.2.0", "sha": "abc123"}}},
		},
		{
			name: "trigger with inputs is manual",
			args: []string{"trigger", "hello", "--input", "greeting=bonjour", "--input", "who=a=b"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/sources/hello/trigger", Body: map[string]any{"event": "manual", "inputs": map[string]any{"greeting": "bonjour", "who": "a=b"}}}},
		},
		{
			name: "runs list passes the filters",
			args: []string{"runs", "list", "--status", "failure", "--source", "app", "--limit", "1"},
			want: []fakeRequest{{Method: "GET", Path: "/api/v1/runs", Query: "limit=1&source=app&status=failure"}},
		},
		{
			name: "schedules list asks for everything",
			args: []string{"schedules", "list"},
			want: []fakeRequest{{Method: "GET", Path: "/api/v1/schedules"}},
		},
		{
			name: "schedules list passes the source",
			args: []string{"schedules", "list", "--source", "a b&c"},
			want: []fakeRequest{{Method: "GET", Path: "/api/v1/schedules", Query: "source=a+b%26c"}},
		},
		{
			name: "runs cancel",
			args: []string{"runs", "cancel", "r-103"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/runs/r-103/cancel", Body: map[string]any{"force": false}}},
		},
		{
			name: "runs cancel --force",
			args: []string{"runs", "cancel", "r-103", "--force"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/runs/r-103/cancel", Body: map[string]any{"force": true}}},
		},
		{
			name: "runs rerun",
			args: []string{"runs", "rerun", "r-102"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/runs/r-102/rerun"}},
		},
		{
			name: "runs rerun --failed",
			args: []string{"runs", "rerun", "r-102", "--failed"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/runs/r-102/rerun", Body: map[string]any{"failed": true}}},
		},
		{
			name: "runs logs of one step pages with the cursor",
			args: []string{"runs", "logs", "r-102", "--job", "test (shard=1)", "--step", "2"},
			want: []fakeRequest{
				{Method: "GET", Path: "/api/v1/runs/r-102"},
				{Method: "GET", Path: "/api/v1/runs/r-102/jobs/j-2/logs", Query: "step=2"},
				{Method: "GET", Path: "/api/v1/runs/r-102/jobs/j-2/logs", Query: "cursor=1&step=2"},
			},
		},
		{
			name: "runs watch reads the run, then its events",
			args: []string{"runs", "watch", "r-201"},
			want: []fakeRequest{
				{Method: "GET", Path: "/api/v1/runs/r-201"},
				{Method: "GET", Path: "/api/v1/runs/r-201/events"},
			},
		},
		{
			name: "agents drain sends the reason and escapes the id",
			args: []string{"agents", "drain", "host a/1", "--reason", "kernel upgrade"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/agents/host%20a%2F1/drain", Body: map[string]any{"reason": "kernel upgrade"}}},
		},
		{
			name: "agents drain without a reason",
			args: []string{"agents", "drain", "agent-2"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/agents/agent-2/drain", Body: map[string]any{}}},
		},
		{
			name: "agents undrain",
			args: []string{"agents", "undrain", "agent-1"},
			want: []fakeRequest{{Method: "DELETE", Path: "/api/v1/agents/agent-1/drain"}},
		},
		{
			name: "agent-tokens create",
			args: []string{"agent-tokens", "create", "--labels", "linux,docker"},
			want: []fakeRequest{{Method: "POST", Path: "/api/v1/agent-tokens", Body: map[string]any{"labels": []any{"linux", "docker"}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeAPI(t, false)
			_, stderr, _ := runCLI(t.Context(), tt.args, map[string]string{envURL: fake.URL(), envToken: fakeToken})
			t.Logf("stderr: %s", stderr)
			if diff := cmp.Diff(tt.want, fake.received()); diff != "" {
				t.Errorf("requests differ (-want +got):\n%s", diff)
			}
		})
	}
}
