// Command kici-admin is the operator's client of a kici orchestrator: it
// registers sources, triggers and follows runs, reads logs, and shows the
// queue and the agents. See docs/admin.md.
package main

import (
	"os"

	"github.com/kici-dev/kici/internal/admincli"
)

func main() {
	os.Exit(admincli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
