package command

import (
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/opemu/opemu/certs"
)

// kubeconfigTemplate points kubectl and client-go at a running opemu, namespace default. The
// cluster and user entries are filled in by runKubeconfig.
const kubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: opemu
  cluster:
    server: %s
%scontexts:
- name: opemu
  context:
    cluster: opemu
    user: opemu
    namespace: default
current-context: opemu
users:
- name: opemu
%s`

// runKubeconfig implements `opemu kubeconfig [--server URL] [--token T] [--certificate-authority F]`:
// it prints a kubeconfig for a running server. The defaults are what `go run .` would serve
// with this environment: its address, https when TLS or TLS_CERT_FILE is set (with the
// self-signed CA from TLS_DIR embedded), and the token of TOKEN or TOKEN_FILE's first record.
func runKubeconfig(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("opemu kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(k string) string { v, _ := lookupEnv(k); return v }
	def := localServer(env)
	server := fs.String("server", def, "URL of the running opemu server")
	token := fs.String("token", "", "bearer token to write (default $TOKEN, else the first token of $TOKEN_FILE)")
	caFile := fs.String("certificate-authority", "", "CA certificate (PEM) to embed for an https server (default ca.crt in $TLS_DIR for TLS=self-signed)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "opemu kubeconfig: "+format+"\n", args...)
		return 2
	}
	u, err := url.Parse(*server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("invalid --server %q: want a URL like http://127.0.0.1:3000", *server)
	}

	var cluster string
	if u.Scheme == "http" {
		// The JavaScript client (@kubernetes/client-node) refuses an http:// server unless the
		// cluster entry says so ("HTTP protocol is not allowed when skipTLSVerify is not set");
		// kubectl, client-go and the Python client accept it, as nothing is verified over plain
		// HTTP anyway.
		cluster = "    insecure-skip-tls-verify: true\n"
	}
	if u.Scheme == "https" {
		ca, err := kubeconfigCA(*caFile, env)
		if err != nil {
			return fail("%v", err)
		}
		if ca != nil {
			cluster = "    certificate-authority-data: " + base64.StdEncoding.EncodeToString(ca) + "\n"
		}
	}
	if *token, err = defaultToken(*token, env); err != nil {
		return fail("%v", err)
	}
	user := "  user: {}\n"
	if *token != "" && u.Scheme == "http" {
		fmt.Fprintln(stderr, "opemu kubeconfig: warning: kubectl and client-go's kubeconfig loader send a token only over https, "+
			"so this kubeconfig's token will not be sent; start opemu with TLS=self-signed (or TLS_CERT_FILE) and use an https server")
	}
	if *token != "" {
		quoted, _ := json.Marshal(*token) // a JSON string is a YAML double-quoted scalar
		user = "  user:\n    token: " + string(quoted) + "\n"
	}
	fmt.Fprintf(stdout, kubeconfigTemplate, u.String(), cluster, user)
	return 0
}

// localServer is the URL `go run .` would serve at with this environment: its address (ADDR,
// else PORT on 127.0.0.1), https when TLS or TLS_CERT_FILE is set.
func localServer(env func(string) string) string {
	scheme := "http"
	if env("TLS") != "" || env("TLS_CERT_FILE") != "" {
		scheme = "https"
	}
	def := scheme + "://127.0.0.1:3000"
	if addr := env("ADDR"); addr != "" {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if host == "" || host == "0.0.0.0" {
				host = "127.0.0.1"
			}
			def = scheme + "://" + net.JoinHostPort(host, port)
		}
	} else if port := env("PORT"); port != "" {
		def = scheme + "://" + net.JoinHostPort("127.0.0.1", port)
	}
	return def
}

// defaultToken is token when set, else TOKEN, else the first token of TOKEN_FILE, else "".
func defaultToken(token string, env func(string) string) (string, error) {
	if token == "" {
		token = env("TOKEN")
	}
	if token == "" && env("TOKEN_FILE") != "" {
		return firstToken(env("TOKEN_FILE"))
	}
	return token, nil
}

// kubeconfigCA returns the CA certificate to embed for an https server: --certificate-authority,
// else the self-signed CA in TLS_DIR (or its default) when there is one. With TLS_CERT_FILE and
// no flag it returns nil: the certificate is then trusted through the system's roots.
func kubeconfigCA(flagFile string, env func(string) string) ([]byte, error) {
	path := flagFile
	if path == "" && env("TLS_CERT_FILE") != "" {
		return nil, nil
	}
	if path == "" {
		dir := env("TLS_DIR")
		if dir == "" {
			dir = defaultTLSDir()
		}
		path = filepath.Join(dir, certs.CAFile)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if env("TLS") == "self-signed" {
				return nil, fmt.Errorf("no CA at %s yet: start opemu with TLS=self-signed first (it makes the CA), or pass --certificate-authority", path)
			}
			return nil, nil
		}
	}
	ca, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(ca), "-----BEGIN CERTIFICATE-----") {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return ca, nil
}

// firstToken returns the token of the first record of a static token file.
func firstToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return "", fmt.Errorf("token file %s holds no token", path)
		}
		if err != nil {
			return "", fmt.Errorf("token file %s: %w", path, err)
		}
		if t := strings.TrimSpace(rec[0]); t != "" {
			return t, nil
		}
	}
}
