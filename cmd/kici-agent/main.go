// Command kici-agent connects to a kici orchestrator over a WebSocket and
// runs the jobs it dispatches. It is configured by environment variables
// only; `kici-agent --help` lists them, and docs/agent.md explains them.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/kici-dev/kici/internal/agent"
	"github.com/kici-dev/kici/internal/agent/reaper"
)

// version is the build version; `-ldflags "-X main.version=v1.2.3"` sets it.
var version = ""

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // the agent stopped with an error (refused by the orchestrator, ...)
	exitUsage  = 2 // bad arguments or environment
)

func main() {
	reaper.Main() // a copy of this binary started as the agent's reaper runs that and exits
	// A Firecracker guest's agent reads its configuration from MMDS first;
	// the token it brings is then hidden like one from the environment.
	if err := agent.ApplyMMDS(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "kici-agent: %v\n", err)
		os.Exit(exitUsage)
	}
	if err := agent.HideToken(os.Args, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "kici-agent: %v\n", err)
		os.Exit(exitUsage)
	}
	fi, err := os.Stderr.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	os.Exit(run(os.Args[1:], os.Getenv, os.Environ(), os.Stdout, os.Stderr, tty))
}

func run(args []string, getenv func(string) string, environ []string, stdout, stderr io.Writer, tty bool) int {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "help":
			fmt.Fprint(stdout, usage())
			return exitOK
		case "-version", "--version", "version":
			fmt.Fprintln(stdout, buildVersion())
			return exitOK
		default:
			fmt.Fprintf(stderr, "kici-agent: unknown argument %q; configure the agent with environment variables (kici-agent --help)\n", a)
			return exitUsage
		}
	}
	log, err := agent.NewLogger(stderr, getenv, tty)
	if err != nil {
		fmt.Fprintf(stderr, "kici-agent: %v\n", err)
		return exitUsage
	}
	cfg, warnings, err := agent.FromEnv(getenv, environ)
	if err != nil {
		fmt.Fprintf(stderr, "kici-agent: %v\n", err)
		return exitUsage
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	cfg.Version = buildVersion()
	// The reaper kills what the steps started once this process is gone,
	// however it goes (internal/agent/reaper).
	if guard, err := reaper.Start(reaper.NewScope(), stderr); err != nil {
		log.Warn("no reaper: the steps' background processes may outlive a killed agent", "error", err)
	} else {
		defer guard.Close()
		cfg.Reaper = guard
	}
	a, err := agent.New(log, cfg)
	if err != nil {
		log.Error("agent not started", "error", err)
		return exitFailed
	}

	// The first SIGTERM or SIGINT drains the agent; a second one kills it
	// (the default action, restored once the first has arrived).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := a.Run(ctx); err != nil {
		log.Error("agent stopped", "error", err)
		return exitFailed
	}
	return exitOK
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func usage() string {
	var b strings.Builder
	b.WriteString(`kici-agent connects to a kici orchestrator and runs the jobs it dispatches.

Usage: kici-agent [--help | --version]

Configuration comes from the environment:

`)
	for _, v := range agent.EnvVars {
		fmt.Fprintf(&b, "  %s\n      %s\n      Default: %s\n", v.Name, v.Help, v.Default)
	}
	b.WriteString(`
On Linux the agent re-executes itself at start to drop KICI_AGENT_TOKEN
from the environment its steps could read, and starts a reaper (a copy of
itself) that kills every process of its steps once the agent is gone,
SIGKILL included.

SIGTERM or SIGINT stops the agent: it takes no new job, cancels (or, with
KICI_AGENT_SHUTDOWN=finish, finishes) the running ones, waits for the
orchestrator to acknowledge what they reported, and exits 0. A second signal
exits at once. Exit status 1 means the agent stopped on an error, for
example when the orchestrator refused its token; 2 means bad configuration.
See docs/agent.md for the details.
`)
	return b.String()
}
