package command

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opemu/opemu/snapshot"
)

// snapshotUsage is how `opemu snapshot` is called (SPEC §23).
const snapshotUsage = "opemu snapshot save|restore [--server URL] [--token TOKEN] [--certificate-authority FILE] [--format yaml|json] FILE"

// snapshotTimeout bounds one save or restore: a cluster's state, read or written whole.
const snapshotTimeout = 5 * time.Minute

// runSnapshot implements `opemu snapshot save FILE` (the running server's state, from POST
// /snapshot, written to FILE, or to stdout for "-") and `opemu snapshot restore FILE` (FILE, or
// stdin for "-", sent to POST /snapshot/restore). It talks to the server over its API, with
// the defaults of `opemu kubeconfig`: the address `go run .` would serve at with this
// environment, the token of TOKEN or TOKEN_FILE, the self-signed CA of TLS_DIR. Flags may
// follow FILE. It returns 2 for a wrong command line, 1 when the server or the file fails.
func runSnapshot(args []string, lookupEnv func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "save" && args[0] != "restore") {
		fmt.Fprintf(stderr, "usage: %s\n", snapshotUsage)
		return 2
	}
	verb := args[0]
	fs := flag.NewFlagSet("opemu snapshot "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := func(k string) string { v, _ := lookupEnv(k); return v }
	server := fs.String("server", localServer(env), "URL of the running opemu server")
	token := fs.String("token", "", "bearer token (default $TOKEN, else the first token of $TOKEN_FILE)")
	caFile := fs.String("certificate-authority", "", "CA certificate (PEM) of an https server (default ca.crt in $TLS_DIR for TLS=self-signed)")
	format := fs.String("format", "yaml", "save: yaml (as kubectl get -o yaml shows objects) or json (one line per object; smaller and faster to read back)")
	keepClock := fs.Bool("keep-clock", false, "restore: leave a manual clock where it is (by default it goes to the snapshot's time)")
	var files []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		files, rest = append(files, fs.Arg(0)), fs.Args()[1:]
	}
	usage := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "opemu snapshot %s: "+format+"\nusage: %s\n", append([]any{verb}, append(args, snapshotUsage)...)...)
		return 2
	}
	if len(files) != 1 {
		return usage("want one FILE (- for standard %s), not %d", map[string]string{"save": "output", "restore": "input"}[verb], len(files))
	}
	if _, err := snapshot.ParseFormat(*format); err != nil {
		return usage("%v", err)
	}
	c, err := dialServer(*server, *token, *caFile, env)
	if err != nil {
		return usage("%v", err)
	}
	if verb == "save" {
		err = c.save(files[0], *format, stdout, stderr)
	} else {
		err = c.restore(files[0], *keepClock, stdin, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "opemu snapshot %s: %v\n", verb, err)
		return 1
	}
	return 0
}

// dialServer is the server a subcommand calls: --server (an http or https URL), --token
// (default $TOKEN, else $TOKEN_FILE's first) and --certificate-authority. Its error is a usage
// error.
func dialServer(server, token, caFile string, env func(string) string) (snapshotCall, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return snapshotCall{}, fmt.Errorf("invalid --server %q: want a URL like http://127.0.0.1:3000", server)
	}
	if token, err = defaultToken(token, env); err != nil {
		return snapshotCall{}, err
	}
	client, err := snapshotClient(u, caFile, env)
	if err != nil {
		return snapshotCall{}, err
	}
	return snapshotCall{client: client, base: u, token: token}, nil
}

// snapshotClient is the HTTP client for u: for https, trusting the CA of kubeconfigCA (else the
// system's roots).
func snapshotClient(u *url.URL, caFile string, env func(string) string) (*http.Client, error) {
	c := &http.Client{Timeout: snapshotTimeout}
	if u.Scheme != "https" {
		return c, nil
	}
	ca, err := kubeconfigCA(caFile, env)
	if err != nil || ca == nil {
		return c, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the CA file holds no usable certificate")
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c.Transport = t
	return c, nil
}

// snapshotCall is one call of `opemu snapshot` to a server.
type snapshotCall struct {
	client *http.Client
	base   *url.URL
	token  string
}

// save writes the server's state to file ("-": out). A file is written whole or not at all: a
// temporary file beside it is renamed over it once complete.
func (c snapshotCall) save(file, format string, out, stderr io.Writer) error {
	body, err := c.post("/snapshot?format="+url.QueryEscape(format), "", nil)
	if err != nil {
		return err
	}
	if file == "-" {
		_, err = out.Write(body)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails once renamed
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	s, err := snapshot.Read(bytes.NewReader(body))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "saved %d objects at resourceVersion %d to %s\n", s.Len(), s.ResourceVersion, file)
	return nil
}

// restore sends file ("-": in) to the server and reports what it restored on out.
func (c snapshotCall) restore(file string, keepClock bool, in io.Reader, out io.Writer) error {
	var body []byte
	var err error
	if file == "-" {
		body, err = io.ReadAll(in)
	} else {
		body, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	path := "/snapshot/restore"
	if keepClock {
		path += "?clock=false"
	}
	answer, err := c.post(path, "application/yaml", body)
	if err != nil {
		return err
	}
	var r snapshot.Restored
	if err := json.Unmarshal(answer, &r); err != nil {
		return fmt.Errorf("the server's answer: %w", err)
	}
	fmt.Fprintf(out, "restored: %d objects at resourceVersion %s, clock %s", r.Objects, r.ResourceVersion, r.Clock)
	if r.ClockRestored {
		fmt.Fprint(out, " (set from the snapshot)")
	}
	fmt.Fprintln(out)
	return nil
}

// post POSTs body to path and returns the answer's body; an answer other than 200 is an error
// that words the server's Status.
func (c snapshotCall) post(path, contentType string, body []byte) ([]byte, error) {
	return c.do(http.MethodPost, path, contentType, body)
}

// do sends a request with method to path and returns the answer's body, as post.
func (c snapshotCall) do(method, path, contentType string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(method, strings.TrimSuffix(c.base.String(), "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return answer, nil
	}
	var st struct{ Reason, Message string }
	if json.Unmarshal(answer, &st) == nil && st.Message != "" {
		return nil, fmt.Errorf("%s: %s (%s)", resp.Status, st.Message, st.Reason)
	}
	return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(answer))
}
