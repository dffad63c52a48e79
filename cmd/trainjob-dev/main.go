// Command trainjob-dev runs the product on a local control plane with
// simulated nodes: make dev, dev-up and dev-down. It is development tooling;
// the product's binaries, manager and trainctl, do not link it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

func main() {
	cmd := dev.NewCommand(os.Stdout, os.Stderr)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
