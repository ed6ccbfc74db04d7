package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// rbacUsage is how `opemu rbac` is called (SPEC §21).
const rbacUsage = "opemu rbac --user NAME [--names] [--name ROLE] [--server URL] [--token TOKEN] [--certificate-authority FILE]"

// runRBAC implements `opemu rbac --user NAME`: the Roles and ClusterRole (with their
// bindings, YAML that kubectl apply takes) allowing exactly what NAME was seen doing, from the
// running server's record of calls (GET /calls/rbac), printed on stdout. With RBAC on, the
// calls that were refused and the rule that allows each come first, as comments. It talks to
// the server as `opemu snapshot` does. It returns 2 for a wrong command line, 1 when the
// server fails.
func runRBAC(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("opemu rbac", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(k string) string { v, _ := lookupEnv(k); return v }
	user := fs.String("user", "", "the user whose calls the roles allow (system:serviceaccount:NS:NAME for a ServiceAccount)")
	names := fs.Bool("names", false, "restrict rules about named objects to those names (resourceNames)")
	name := fs.String("name", "", "name of the roles and bindings (default observed:<user>)")
	server := fs.String("server", localServer(env), "URL of the running opemu server")
	token := fs.String("token", "", "bearer token (default $TOKEN, else the first token of $TOKEN_FILE)")
	caFile := fs.String("certificate-authority", "", "CA certificate (PEM) of an https server (default ca.crt in $TLS_DIR for TLS=self-signed)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "opemu rbac: "+format+"\nusage: %s\n", append(args, rbacUsage)...)
		return 2
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	if *user == "" {
		return usage("--user is required")
	}
	c, err := dialServer(*server, *token, *caFile, env)
	if err != nil {
		return usage("%v", err)
	}
	q := url.Values{"user": {*user}}
	if *names {
		q.Set("names", "true")
	}
	if *name != "" {
		q.Set("name", *name)
	}
	body, err := c.do(http.MethodGet, "/calls/rbac?"+q.Encode(), "", nil)
	if err != nil {
		fmt.Fprintf(stderr, "opemu rbac: %v\n", err)
		return 1
	}
	_, _ = stdout.Write(body)
	return 0
}
