// Command etcd starts an etcd server. The etcd module keeps its main package
// in a module that cannot be required from here, so this wraps the server's
// entry point with the same command line.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
