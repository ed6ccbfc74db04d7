package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/server"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// loop is the server's Loop (pause, step, resume, queues; SPEC §16) over every controller this
// app runs, by name: the Application controller and one per Controller object (hooks).
type loop struct {
	ctrls func() []*reconciler.Controller // sorted by name
	kinds *kinds.Registry
	clk   clock.PassiveClock
}

var _ server.Loop = loop{}

// controllerState is one controller as GET /controller shows it.
type controllerState struct {
	Name string `json:"name"`
	// Resource is what it reconciles (plural.group).
	Resource string `json:"resource"`
	// Kind, APIVersion and Namespaced describe the resource's objects while it is served
	// (the dashboard finds their history with them).
	Kind       string `json:"kind,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	Namespaced bool   `json:"namespaced"`
	// Running says its workers run here (this replica leads).
	Running bool                   `json:"running"`
	Paused  bool                   `json:"paused"`
	Queue   []reconciler.QueueItem `json:"queue"`
	// Dropped are the objects given up on after MAX_RETRIES: not queued again, by the resync
	// either, until they change (or a reconcile is asked for).
	Dropped []string `json:"dropped"`
}

// pick returns the controller name, or every controller for "".
func (l loop) pick(name string) ([]*reconciler.Controller, error) {
	all := l.ctrls()
	if name == "" {
		return all, nil
	}
	var names []string
	for _, c := range all {
		if c.Name() == name {
			return []*reconciler.Controller{c}, nil
		}
		names = append(names, c.Name())
	}
	return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("no controller named %q (controllers: %s)", name, strings.Join(names, ", ")),
	}}
}

func (l loop) Controllers(name string) (any, error) {
	ctrls, err := l.pick(name)
	if err != nil {
		return nil, err
	}
	out := make([]controllerState, 0, len(ctrls))
	for _, c := range ctrls {
		q := c.Queue()
		if q == nil {
			q = []reconciler.QueueItem{}
		}
		st := controllerState{Name: c.Name(), Resource: c.Resource().String(), Running: c.Running(), Paused: c.Paused(), Queue: q, Dropped: c.Dropped()}
		if k, ok := l.kinds.Resource(c.Resource()); ok {
			st.Kind, st.APIVersion, st.Namespaced = k.Kind, k.GroupVersion(), k.Namespaced
		}
		out = append(out, st)
	}
	return out, nil
}

func (l loop) Pause(name string) error {
	ctrls, err := l.pick(name)
	for _, c := range ctrls {
		c.Pause()
	}
	return err
}

func (l loop) Resume(name string) error {
	ctrls, err := l.pick(name)
	for _, c := range ctrls {
		c.Resume()
	}
	return err
}

// Step steps the first controller, by name, that has a key due.
func (l loop) Step(ctx context.Context, name string) (any, error) {
	ctrls, err := l.pick(name)
	if err != nil {
		return nil, err
	}
	running := false
	for _, c := range ctrls {
		out, err := c.Step(ctx)
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, reconciler.ErrNotRunning):
		case errors.Is(err, reconciler.ErrNothingDue):
			running = true
		default:
			return nil, err
		}
	}
	if !running {
		return nil, apierrors.NewServiceUnavailable("the controller does not run here: this replica does not lead")
	}
	return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
		Message: l.nothingDue(ctrls),
	}}
}

// nothingDue says why a step found nothing to do, and when something will be due.
func (l loop) nothingDue(ctrls []*reconciler.Controller) string {
	var next time.Time
	waiting := 0
	for _, c := range ctrls {
		for _, it := range c.Queue() {
			if it.State == "waiting" {
				waiting++
				if next.IsZero() || it.Due.Before(next) {
					next = it.Due
				}
			}
		}
	}
	if waiting == 0 {
		return "nothing to step: the queue is empty"
	}
	return fmt.Sprintf("nothing to step: no key is due; %d waiting, the next due in %v (at %s); wait, or advance the clock",
		waiting, next.Sub(l.clk.Now()).Round(time.Millisecond), next.UTC().Format(time.RFC3339Nano))
}

// sortControllers orders controllers by name.
func sortControllers(ctrls []*reconciler.Controller) []*reconciler.Controller {
	slices.SortFunc(ctrls, func(a, b *reconciler.Controller) int { return strings.Compare(a.Name(), b.Name()) })
	return ctrls
}
