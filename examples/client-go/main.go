// Command client-go is a small controller written with client-go against opemu: the operator
// pattern seen from outside. It watches Applications with a dynamic informer, queues their keys
// in a work queue, and labels every Application by size (size=small|large, from spec.replicas)
// with a merge patch. Level-based: it looks at the object each time, so any number of changes
// collapse into one pass.
//
// It finds its server as kubectl does: --kubeconfig, else $KUBECONFIG, else ~/.kube/config (the
// current context), with --server overriding the server; with no kubeconfig at all, opemu's
// default address, http://127.0.0.1:3000.
//
//	go run .                                        # opemu on 127.0.0.1:3000, in a terminal of its own
//	go run . kubeconfig > /tmp/opemu.kubeconfig
//	KUBECONFIG=/tmp/opemu.kubeconfig go run ./examples/client-go
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

var applications = schema.GroupVersionResource{Group: "cloudnative.elide.dev", Version: "v1", Resource: "applications"}

// SizeLabel is the label this controller maintains.
const SizeLabel = "example.com/size"

// defaultServer is where opemu listens by default (go run .), used when there is no kubeconfig.
const defaultServer = "http://127.0.0.1:3000"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
	server := flag.String("server", "", "the server's URL, overriding the kubeconfig's (default: the kubeconfig's current context, else "+defaultServer+")")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := restConfig(*kubeconfig, *server)
	if err == nil {
		err = run(ctx, cfg, log)
	}
	if err != nil {
		log.Error("controller stopped", "err", err)
		os.Exit(1)
	}
}

// restConfig loads the client configuration as kubectl does: the kubeconfig named, else
// $KUBECONFIG, else ~/.kube/config, at its current context, with server (when set) replacing
// its server. With no kubeconfig anywhere it is opemu's default address (or server).
func restConfig(kubeconfig, server string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{}
	overrides.ClusterInfo.Server = server
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		if server == "" {
			server = defaultServer
		}
		return &rest.Config{Host: server}, nil
	}
	return cfg, err
}

// run watches Applications and keeps their size label until ctx is done.
func run(ctx context.Context, cfg *rest.Config, log *slog.Logger) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()

	factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 10*time.Minute)
	informer := factory.ForResource(applications).Informer()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return ctx.Err()
	}
	log.Info("synced; labelling Applications by size", "server", cfg.Host)

	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return nil
		}
		err := reconcile(ctx, client, informer.GetIndexer(), key, log)
		switch {
		case err == nil:
			queue.Forget(key)
		case queue.NumRequeues(key) < 5:
			log.Warn("retrying", "key", key, "err", err)
			queue.AddRateLimited(key)
		default:
			log.Error("giving up", "key", key, "err", err)
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// reconcile makes the size label of the Application at key match its replicas.
func reconcile(ctx context.Context, client dynamic.Interface, store cache.Indexer, key string, log *slog.Logger) error {
	obj, exists, err := store.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	app := obj.(*unstructured.Unstructured)
	replicas, _, _ := unstructured.NestedInt64(app.Object, "spec", "replicas")
	want := "small"
	if replicas > 5 {
		want = "large"
	}
	if app.GetLabels()[SizeLabel] == want {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{SizeLabel: want}}})
	_, err = client.Resource(applications).Namespace(app.GetNamespace()).Patch(ctx, app.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "size-labeller"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("labelling %s: %w", key, err)
	}
	log.Info("labelled", "application", key, "replicas", replicas, "size", want)
	return nil
}
