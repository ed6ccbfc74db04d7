package tools

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"

	"github.com/opemu/opemu/test/internal/process"
)

var (
	// opemuBin and operatorBin are the binaries TestMain builds.
	opemuBin, operatorBin string
	// testenv is the e2e-framework environment of the operator suite: one opemu, the
	// Memcached CRD and the operator, started by its Setup.
	testenv env.Environment
	// suiteStarted is when TestMain began to start the suite's environment (the suite's wall
	// time counts from there).
	suiteStarted time.Time
)

// exampleDir is the memcached operator example, from this package's directory.
var exampleDir = filepath.Join("..", "..", "examples", "memcached-operator")

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	flag.Parse()
	if flag.Lookup("test.list").Value.String() != "" {
		return m.Run() // listing runs no test: nothing to build
	}
	dir, err := os.MkdirTemp("", "opemu-tools-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	opemuBin, operatorBin = filepath.Join(dir, "opemu"), filepath.Join(dir, "memcached-operator")
	var wg sync.WaitGroup
	var errOpemu, errOperator error
	wg.Go(func() { errOpemu = process.Build(opemuBin, "github.com/opemu/opemu", raceEnabled) })
	wg.Go(func() {
		errOperator = process.Build(operatorBin, "github.com/opemu/opemu/examples/memcached-operator", raceEnabled)
	})
	wg.Wait()
	if err := errors.Join(errOpemu, errOperator); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	suiteStarted = time.Now()
	s := &suiteEnv{dir: dir}
	testenv = env.NewWithConfig(envconf.New())
	testenv.Setup(s.startOpemu, envfuncs.SetupCRDs(filepath.Join(exampleDir, "config", "crd", "bases"), "*.yaml"), crdEstablished, s.startOperator)
	testenv.Finish(s.stop)
	code := testenv.Run(m)
	if s.stopErr != nil {
		fmt.Fprintln(os.Stderr, "stopping the suite's environment:", s.stopErr)
		code = 1
	}
	return code
}

// suiteEnv is the operator suite's processes.
type suiteEnv struct {
	dir      string
	opemu    *process.Opemu
	operator *process.Process
	stopErr  error // from stop (e2e-framework only logs a Finish step's error)
}

// startOpemu starts opemu and points the environment's configuration at its kubeconfig.
func (s *suiteEnv) startOpemu(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	o, err := process.StartOpemu(opemuBin)
	if err != nil {
		return ctx, err
	}
	s.opemu = o
	kc, err := o.Kubeconfig(opemuBin)
	if err != nil {
		return ctx, err
	}
	path := filepath.Join(s.dir, "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		return ctx, err
	}
	cfg.WithKubeconfigFile(path)
	return ctx, nil
}

// crdEstablished waits for the Memcached CRD to be Established.
func crdEstablished(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "memcacheds.cache.example.com"
	if err := apiextensionsv1.AddToScheme(cfg.Client().Resources().GetScheme()); err != nil {
		return ctx, err
	}
	err := wait.For(conditions.New(cfg.Client().Resources()).ResourceMatch(crd, func(o k8s.Object) bool {
		for _, c := range o.(*apiextensionsv1.CustomResourceDefinition).Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	}), wait.WithTimeout(30*time.Second), wait.WithInterval(50*time.Millisecond), wait.WithContext(ctx))
	return ctx, err
}

var workersRE = regexp.MustCompile(`Starting workers.*controller=memcached`)

// startOperator runs the memcached operator against the kubeconfig (its webhooks off: the
// suite's rejected object is the CRD schema's) and waits for its controller's workers.
func (s *suiteEnv) startOperator(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	p, err := process.Start(operatorBin, []string{"--enable-webhooks=false", "--health-probe-bind-address=0", "--metrics-bind-address=0"},
		[]string{"KUBECONFIG=" + cfg.KubeconfigFile()})
	if err != nil {
		return ctx, err
	}
	s.operator = p
	_, err = p.WaitLog(workersRE, 60*time.Second)
	return ctx, err
}

// stop stops the operator, then opemu.
func (s *suiteEnv) stop(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	var errs []error
	if s.operator != nil {
		errs = append(errs, s.operator.Stop())
	}
	if s.opemu != nil {
		errs = append(errs, s.opemu.Stop())
	}
	s.stopErr = errors.Join(errs...)
	return ctx, s.stopErr
}
