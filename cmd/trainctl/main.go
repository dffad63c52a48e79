// Command trainctl looks after TrainJobs: trainctl get, describe and
// uninstall.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/trainjob-operator/trainjob-operator/internal/cli"
)

func main() {
	cmd := cli.NewCommand(os.Stdout, os.Stderr)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
