package admincli

import (
	"bytes"
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/ from the current output")

// goldenCase is one kici-admin invocation against a fresh fake API, whose
// exit status, stdout and stderr are compared with
// testdata/golden/<name>.txt.
type goldenCase struct {
	name string
	// args may hold {url} (the fake's base URL) and {dead} (a URL where
	// nothing listens).
	args []string
	// env overrides the default KICI_ADMIN_URL={url} and
	// KICI_ADMIN_TOKEN=<the fake's token>; values expand like args.
	env map[string]string
	// empty makes every listing of the fake empty.
	empty bool
	// stdin is what the command reads on stdin.
	stdin string
	code  int
}

// runGolden runs each case as a parallel subtest.
func runGolden(t *testing.T, tests []goldenCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFakeAPI(t, tt.empty)
			dead := deadURL(t)
			expand := strings.NewReplacer("{url}", fake.URL(), "{dead}", dead)
			vars := map[string]string{envURL: fake.URL(), envToken: fakeToken}
			for k, v := range tt.env {
				vars[k] = expand.Replace(v)
			}
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = expand.Replace(a)
			}
			stdout, stderr, code := runCLIInput(t.Context(), args, vars, tt.stdin)
			if code != tt.code {
				t.Errorf("exit status: got %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			got := goldenText(tt, code, stdout, stderr)
			got = strings.NewReplacer(fake.URL(), "http://127.0.0.1:PORT", dead, "http://127.0.0.1:DEAD").Replace(got)
			compareGolden(t, tt.name, got)
		})
	}
}

// runCLI runs kici-admin with a fixed clock and no waiting.
func runCLI(ctx context.Context, args []string, vars map[string]string) (stdout, stderr string, code int) {
	return runCLIInput(ctx, args, vars, "")
}

// runCLIInput is runCLI with stdin.
func runCLIInput(ctx context.Context, args []string, vars map[string]string, stdin string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(ctx, args, &env{
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errOut,
		getenv: func(k string) string { return vars[k] },
		now:    func() time.Time { return fakeNow },
		sleep:  func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	return out.String(), errOut.String(), code
}

// goldenText is the golden file's content: the command line with its
// environment, the exit status, stdout and stderr.
func goldenText(tt goldenCase, code int, stdout, stderr string) string {
	var b strings.Builder
	b.WriteString("$")
	for _, k := range []string{envURL, envToken} {
		if v, ok := tt.env[k]; ok {
			b.WriteString(" " + k + "=" + quoteArg(v))
		}
	}
	b.WriteString(" kici-admin")
	for _, a := range tt.args {
		b.WriteString(" " + quoteArg(a))
	}
	if tt.stdin != "" {
		b.WriteString(" < " + strconv.Quote(tt.stdin))
	}
	b.WriteString("\n--- exit " + strconv.Itoa(code) + "\n--- stdout\n" + stdout + "--- stderr\n" + stderr)
	return b.String()
}

func quoteArg(s string) string {
	if s == "" || strings.ContainsAny(s, " \"'$()") {
		return "'" + s + "'"
	}
	return s
}

func compareGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (go test -update writes it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s", path, diff)
	}
}

// deadURL is a URL on 127.0.0.1 where nothing listens any more.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}
