//go:build !etcd

package command

import (
	"fmt"
	"io"
)

// runEtcd is `opemu etcd` in a binary built without etcd (see app.EtcdBuiltIn).
func runEtcd(_ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "opemu etcd: this binary is built without etcd; build it with: go build -tags etcd -o opemu .")
	return 2
}
