// Command vipctl computes, renders, delivers and keeps right the keepalived
// and haproxy configuration behind a cluster's virtual IPs.
package main

import (
	"os"

	"github.com/vipctl/vipctl/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.StdStreams()))
}
