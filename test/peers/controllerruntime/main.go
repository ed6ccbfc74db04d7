// Command controllerruntime runs controller-runtime's own integration suites (the version in
// opemu's go.mod) against opemu as envtest's existing cluster, and counts their specs:
//
//	go run ./test/peers/controllerruntime                          # the eight packages below
//	go run ./test/peers/controllerruntime -pkgs pkg/client/apiutil -out /tmp/crpeers
//
// It downloads controller-runtime's module with `go mod download` and copies it into a scratch
// folder (the module cache is read-only), builds opemu, and for each package in turn starts a
// fresh opemu (HTTPS with TLS=self-signed, a bearer token, ENABLE_CONTROLLER=false and NODES=0,
// since the kube-apiserver envtest starts has no controllers and no nodes), writes its
// kubeconfig with `opemu kubeconfig`, and runs
//
//	USE_EXISTING_CLUSTER=true KUBECONFIG=<it> go test -json ./<pkg> -args -ginkgo.json-report=<file>
//
// in the copied module (less the tests notApplicable names), bounded by -timeout. It then stops
// that opemu. It writes into -out each
// package's log, ginkgo report and opemu log, and summary.md: specs passed, failed and skipped
// per package (plain Go tests counted apart) and every failure grouped by its message. It exits 1
// when a spec failed or a package produced no report, 2 when it could not run at all.
//
// One package runs at a time: the suites are CPU-heavy and opemu shares the machine with them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// defaultPackages are controller-runtime's suites that talk to an API server.
const defaultPackages = "pkg/client,pkg/cache,pkg/builder,pkg/manager,pkg/controller/controllerutil," +
	"pkg/internal/controller,pkg/envtest,pkg/client/apiutil"

func main() {
	pkgs := flag.String("pkgs", defaultPackages, "comma-separated packages of controller-runtime to run")
	out := flag.String("out", "", "directory for logs, reports and summary.md (default: a new temporary directory)")
	timeout := flag.Duration("timeout", 12*time.Minute, "bound on each package's go test (build included)")
	src := flag.String("src", "", "an already copied controller-runtime source tree to use instead of downloading one")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, strings.Split(*pkgs, ","), *out, *src, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllerruntime:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(ctx context.Context, pkgs []string, out, src string, timeout time.Duration) (int, error) {
	repo, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	if out == "" {
		if out, err = os.MkdirTemp("", "crpeers-"); err != nil {
			return 0, err
		}
	}
	out, _ = filepath.Abs(out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, err
	}
	scratch, err := os.MkdirTemp("", "crpeers-scratch-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(scratch)

	version := ""
	if src == "" {
		if src, version, err = copySource(ctx, repo, scratch); err != nil {
			return 0, err
		}
	}
	bin := filepath.Join(scratch, "opemu")
	if err := goCmd(ctx, repo, "build", "-o", bin, ".").Run(); err != nil {
		return 0, fmt.Errorf("building opemu: %w", err)
	}
	fmt.Printf("controller-runtime %s in %s; logs and reports in %s\n", version, src, out)

	var results []result
	code := 0
	for _, pkg := range pkgs {
		if ctx.Err() != nil {
			break
		}
		r, err := runPackage(ctx, bin, src, out, scratch, strings.TrimSpace(pkg), timeout)
		if err != nil {
			return 0, err
		}
		fmt.Printf("%-32s %4d passed %4d failed %4d skipped %4d pending  (Go tests %d/%d) %6d requests %4.0fs %s\n",
			r.Package, r.Passed, r.Failed, r.Skipped, r.Pending, r.GoPassed, r.GoFailed, r.Requests, r.Seconds, r.Note)
		if r.Failed > 0 || r.GoFailed > 0 || r.Note != "" {
			code = 1
		}
		results = append(results, r)
	}
	f, err := os.Create(filepath.Join(out, "summary.md"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fmt.Fprintf(f, "# controller-runtime %s against opemu (%s)\n\n", version, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	writeSummary(f, results)
	fmt.Println("summary:", f.Name())
	return code, f.Close()
}

// runPackage runs one package's suite against a fresh opemu.
func runPackage(ctx context.Context, bin, src, out, scratch, pkg string, timeout time.Duration) (result, error) {
	r := result{Package: pkg}
	slug := strings.ReplaceAll(pkg, "/", "_")
	dir := filepath.Join(scratch, slug)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	srv, err := startOpemu(ctx, bin, dir, filepath.Join(out, slug+".opemu.log"))
	if err != nil {
		return r, fmt.Errorf("%s: %w", pkg, err)
	}
	defer srv.stop()

	report := filepath.Join(out, slug+".ginkgo.json")
	os.Remove(report)
	log, err := os.Create(filepath.Join(out, slug+".log"))
	if err != nil {
		return r, err
	}
	defer log.Close()

	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// go test's own -timeout fires first, so that a hung spec is reported with its goroutines.
	args := []string{"test", "-count=1", "-json", "-timeout", (timeout - 30*time.Second).String()}
	if na, ok := notApplicable[pkg]; ok {
		args = append(args, "-skip", na.skip)
		r.NotRun = na.skip + ": " + na.reason
	}
	cmd := goCmd(tctx, src, append(args, "./"+pkg, "-args", "-ginkgo.json-report="+report, "-ginkgo.no-color")...)
	cmd.Env = append(cmd.Environ(), "USE_EXISTING_CLUSTER=true", "KUBECONFIG="+srv.kubeconfig)
	cmd.Stdout = nil
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	cmd.Stderr = log
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	if err := readGoTests(stdout, &r, log); err != nil {
		return r, err
	}
	runErr := cmd.Wait()
	r.Seconds = time.Since(start).Seconds()
	if err := readGinkgo(report, &r); err != nil {
		r.Note = fmt.Sprintf("no ginkgo report (go test: %v)", runErr)
		if tctx.Err() != nil {
			r.Note = fmt.Sprintf("no ginkgo report: timed out after %v", timeout)
		}
	}
	if n, err := srv.requests(); err != nil {
		r.Note = strings.TrimSpace(r.Note + " requests not counted: " + err.Error())
	} else if r.Requests = int(n); n == 0 {
		r.Note = strings.TrimSpace(r.Note + " opemu served no API request: the suite did not use it")
	}
	if !srv.alive() {
		r.Note = strings.TrimSpace(r.Note + " opemu exited during the run")
	}
	return r, nil
}
