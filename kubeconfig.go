package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
)

// kubeconfigTemplate points kubectl and client-go at a running opemu: plain HTTP, no
// credentials, namespace default.
const kubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: opemu
  cluster:
    server: %s
contexts:
- name: opemu
  context:
    cluster: opemu
    user: opemu
    namespace: default
current-context: opemu
users:
- name: opemu
  user: {}
`

// runKubeconfig implements `opemu kubeconfig [--server URL]`: it prints a kubeconfig for a
// running server. The default server is the one `go run .` would serve with this environment.
func runKubeconfig(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("opemu kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := "http://127.0.0.1:3000"
	if addr, ok := lookupEnv("ADDR"); ok && addr != "" {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if host == "" || host == "0.0.0.0" {
				host = "127.0.0.1"
			}
			def = "http://" + net.JoinHostPort(host, port)
		}
	} else if port, ok := lookupEnv("PORT"); ok && port != "" {
		def = "http://" + net.JoinHostPort("127.0.0.1", port)
	}
	server := fs.String("server", def, "URL of the running opemu server")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	u, err := url.Parse(*server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "opemu kubeconfig: invalid --server %q: want a URL like http://127.0.0.1:3000\n", *server)
		return 2
	}
	fmt.Fprintf(stdout, kubeconfigTemplate, u.String())
	return 0
}
