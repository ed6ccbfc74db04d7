package workloads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// The resources the controllers reconcile.
var (
	DeploymentResource  = cache.GroupResource{Group: "apps", Resource: "deployments"}
	ReplicaSetResource  = cache.GroupResource{Group: "apps", Resource: "replicasets"}
	PodResource         = cache.GroupResource{Resource: "pods"}
	StatefulSetResource = cache.GroupResource{Group: "apps", Resource: "statefulsets"}
	JobResource         = cache.GroupResource{Group: "batch", Resource: "jobs"}
)

// Client is how the controllers read and write objects: the in-process API client
// (registry.Client), so a status passes the kind's schema like a client's.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	Create(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Delete(ctx context.Context, key cache.Key, pre cache.Preconditions) (*cache.Object, bool, error)
	// DeletePropagating deletes with a propagation policy (the CronJob controller deletes its
	// Jobs in the background: a Job's own default orphans its Pods).
	// Patch patches (adoption and release of children: strategic merge patches of metadata).
	Patch(ctx context.Context, key cache.Key, sub, patchType string, body []byte) (*cache.Object, error)
	DeletePropagating(ctx context.Context, key cache.Key, pre cache.Preconditions, policy metav1.DeletionPropagation) (*cache.Object, bool, error)
}

// EventRecorder records Events (*events.Recorder implements it).
type EventRecorder interface {
	Record(ctx context.Context, ev events.Event)
}

// Config configures the controllers. Client is required.
type Config struct {
	Client Client
	// Events may be nil.
	Events EventRecorder
	// Clock stamps status times and times minReadySeconds and Jobs' backoff. Nil means the
	// real clock.
	Clock clock.PassiveClock

	claims *claims // the children each controller controlled at its last pass (claimOwned)
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	c.claims = newClaims() // each controller's own
	return c
}

// read gets key's object and decodes it into v; gone says it no longer exists.
func read(ctx context.Context, c Client, key cache.Key, v any) (obj *cache.Object, gone bool, err error) {
	obj, err = c.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(obj.Raw(), v); err != nil {
		return nil, false, reconciler.TerminalError(err)
	}
	return obj, false, nil
}

// writeStatus stores status as obj's status through the status subresource, conditional on
// the version read; a conflict makes the controller try again on the newer object.
func writeStatus(ctx context.Context, c Client, obj *cache.Object, status any) error {
	m, err := obj.Decode()
	if err != nil {
		return reconciler.TerminalError(err)
	}
	raw, err := json.Marshal(status)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	st, err := cache.DecodeJSON(raw)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	m["status"] = st
	m["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatUint(obj.ResourceVersion(), 10)
	_, err = c.UpdateStatus(ctx, obj.Key(), m)
	return err
}

// record records a Normal Event about obj.
func record(ctx context.Context, cfg Config, obj *cache.Object, apiVersion, kind, source, reason, msg string) {
	recordEvent(ctx, cfg, obj, apiVersion, kind, source, events.TypeNormal, reason, msg)
}

// recordEvent records an Event of typ (events.TypeNormal or TypeWarning) about obj.
func recordEvent(ctx context.Context, cfg Config, obj *cache.Object, apiVersion, kind, source, typ, reason, msg string) {
	if cfg.Events == nil {
		return
	}
	k := obj.Key()
	severity := events.Info
	if typ == events.TypeWarning {
		severity = events.Warning
	}
	cfg.Events.Record(ctx, events.Event{
		Object: events.Ref{APIVersion: apiVersion, Kind: kind, Namespace: k.Namespace, Name: k.Name, UID: obj.UID(),
			ResourceVersion: strconv.FormatUint(obj.ResourceVersion(), 10)},
		Type: typ, Severity: severity, Reason: reason, Message: msg, Source: source,
	})
}

// equalJSON reports whether a and b encode alike: two statuses compared as they would be
// stored (times to the second).
func equalJSON(a, b any) bool {
	ra, err1 := json.Marshal(a)
	rb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ra, rb)
}
