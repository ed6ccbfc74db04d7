// Command record sends the conformance corpus to a real kube-apiserver and writes its
// normalised answers into test/conformance/recorded/ (see test/conformance's doc.go):
//
//	KAS_FRESH=1 bash ../shared/oracle/start.sh
//	go run ./test/conformance/record                      # every case
//	go run ./test/conformance/record -cases 'watch-*,crd-*'  # some; the others' recordings stay
//	bash ../shared/oracle/start.sh stop
//
// A case whose namespace, setup or request fails is not recorded, and the command exits 1
// naming it.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/opemu/opemu/test/conformance"
)

func main() {
	server := flag.String("server", "https://127.0.0.1:16443", "kube-apiserver's URL")
	token := flag.String("token", "kas-admin-token", "bearer token (the oracle's system:masters user)")
	ca := flag.String("ca", "/tmp/kas/pki/serving.crt", "CA certificate (PEM) that verifies the server; empty: the system's")
	cases := flag.String("cases", "", "comma-separated case names or glob patterns (default: every case)")
	dir := flag.String("dir", "test/conformance", "the conformance directory (cases/ in it, recorded/ written)")
	parallel := flag.Int("parallel", 4, "cases run at a time")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *server, *token, *ca, *cases, *dir, *parallel); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, server, token, ca, patterns, dir string, parallel int) error {
	corpus, err := conformance.LoadCorpus(filepath.Join(dir, "cases"))
	if err != nil {
		return err
	}
	selected, err := corpus.Select(patterns)
	if err != nil {
		return err
	}
	if len(selected) == 0 {
		return fmt.Errorf("no case matches %q", patterns)
	}
	client, err := httpClient(ca)
	if err != nil {
		return err
	}
	t := &conformance.Target{URL: server, Token: token, Client: client}
	version, err := serverVersion(ctx, t)
	if err != nil {
		return err
	}
	modes := conformance.ByAuthorization(selected)
	if len(modes) > 1 {
		return fmt.Errorf("the cases selected need different authorization modes: record each on its own (-cases 'rbac-*' against an oracle started with KAS_AUTHZ=RBAC)")
	}
	for mode := range modes {
		if err := checkAuthorization(ctx, t, mode); err != nil {
			return err
		}
	}
	if err := t.ApplyFixtures(ctx, corpus.Fixtures); err != nil {
		return err
	}
	start := time.Now()
	runs := t.RunAll(ctx, selected, parallel)
	answers := map[string]conformance.RecordedCase{}
	var failed []string
	steps := 0
	for _, r := range runs {
		if err := check(r); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", r.Case.Name, err))
			continue
		}
		answers[r.Case.Name] = conformance.Normalize(r)
		steps += len(r.Steps)
	}
	if err := conformance.WriteRecorded(filepath.Join(dir, "recorded"), version, corpus, answers); err != nil {
		return err
	}
	fmt.Printf("recorded %d cases (%d compared steps) from %s in %s\n", len(answers), steps, version, time.Since(start).Round(time.Millisecond))
	if len(failed) > 0 {
		return fmt.Errorf("%d cases not recorded:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}

// check refuses a run that did not finish or whose setup failed (an error the step did not wait
// for with Until): its recording would not say what the case means.
func check(r *conformance.Run) error {
	if r.Err != nil {
		return r.Err
	}
	for i, a := range r.Setup {
		if a.Status >= 400 && (i >= len(r.Case.Setup) || r.Case.Setup[i].Until != a.Status) {
			return fmt.Errorf("setup %d answered %d: %.300s", i, a.Status, a.Body)
		}
	}
	return nil
}

// httpClient trusts the CA in caFile (when set) and sends HTTP/2 as kubectl does.
func httpClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	tr.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: tr}, nil
}

// serverVersion is "kube-apiserver <gitVersion>" from /version.
func serverVersion(ctx context.Context, t *conformance.Target) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL+"/version", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	resp, err := t.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil || v.GitVersion == "" {
		return "", fmt.Errorf("%s/version: %d %s", t.URL, resp.StatusCode, b)
	}
	return "kube-apiserver " + v.GitVersion, nil
}

// checkAuthorization refuses a server whose authorization mode is not the one the cases need
// (mode "RBAC", or "" for AlwaysAllow): it asks whether a user bound to nothing may list
// Secrets, which only AlwaysAllow allows.
func checkAuthorization(ctx context.Context, t *conformance.Target, mode string) error {
	body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"nobody-bound","resourceAttributes":{"verb":"list","resource":"secrets"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+"/apis/authorization.k8s.io/v1/subjectaccessreviews", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var review struct {
		Status struct{ Allowed bool } `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		return fmt.Errorf("subjectaccessreview: %s: %w", resp.Status, err)
	}
	if rbac := !review.Status.Allowed; rbac != (mode == "RBAC") {
		return fmt.Errorf("the cases need authorization mode %q but %s allows a user bound to nothing: %v (start the oracle with KAS_AUTHZ=RBAC, or without)", mode, t.URL, review.Status.Allowed)
	}
	return nil
}
