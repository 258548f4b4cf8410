// Command kici is the workflow author's tool: it validates and compiles
// .kici/workflows files and previews which workflows an event would run.
package main

import (
	"os"

	"github.com/kici-dev/kici/internal/authorcli"
)

func main() {
	os.Exit(authorcli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
