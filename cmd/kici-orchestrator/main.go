// Command kici-orchestrator is kici's server. See `kici-orchestrator --help`.
package main

import (
	"os"

	"github.com/kici-dev/kici/internal/orchestrator"
)

func main() {
	os.Exit(orchestrator.Main(os.Args[1:], os.Stdout, os.Stderr))
}
