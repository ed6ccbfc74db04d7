// Command opemu emulates a Kubernetes-style API server in memory, with the operator pattern
// running inside it. See README.md; the command itself is package internal/command.
package main

import (
	"os"

	"github.com/opemu/opemu/internal/command"
	_ "github.com/opemu/opemu/internal/memprofile" // heap-profile sampling off from the start
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(command.Run(version, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}
