package registry

import (
	"context"
	"errors"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/webhooks"
)

// generateNameAttempts bounds the retries of a create whose generated name was taken.
const generateNameAttempts = 8

// Create is the write path of a new object of t.Kind in t.Key.Namespace (SPEC §6): type and
// name checks, the kind's create defaults, pruning and defaulting, the namespace's admission (a
// missing one is a 404, a Terminating one a 403), the write's managedFields, mutating admission,
// stamping (uid, timestamps, generation, a generated name), metadata and schema validation,
// validating admission, the kind's lifecycle, its limit, the namespace's again, then the store.
// obj is consumed.
func (s *Store) Create(ctx context.Context, t Target, obj map[string]any, o Options) (Result, error) {
	if err := checkTypeMeta(t.Kind, obj); err != nil {
		return Result{}, err
	}
	if t.Kind.Conversion != nil {
		return s.createView(ctx, t, obj, o)
	}
	md, err := metadata(obj)
	if err != nil {
		return Result{}, err
	}
	versioned := carriesVersion(md, o)
	key := t.Key
	key.Name = stringOf(md["name"])
	if key.Name != "" {
		if err := s.checkWritable(t, key, o); err != nil {
			return Result{}, err
		}
	}
	if ns := stringOf(md["namespace"]); ns != "" && ns != t.Key.Namespace && t.Kind.Namespaced {
		return Result{}, badRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if t.Kind.Status && !t.Kind.StatusOnCreate {
		delete(obj, "status")
	}
	prefix := stringOf(md["generateName"])
	generated := key.Name == "" && prefix != ""
	var track func() error
	if !o.applying && !o.tracked {
		track = func() error { return s.trackCreate(t, obj, o) }
	}
	warnings, err := s.admit(ctx, admitRequest{t: t, op: webhooks.Create, obj: obj, o: o, track: track, stamp: func() error {
		// As kube-apiserver's BeforeCreate: after the field manager and mutating admission.
		if t.Kind.PrepareForCreate != nil {
			t.Kind.PrepareForCreate(obj)
		}
		md := metadataOf(obj)
		if name := stringOf(md["name"]); name != "" {
			key.Name = name // a mutating webhook may name it
		} else if generated {
			key.Name = generateName(prefix)
		}
		s.stampCreate(key, md)
		if t.Kind.PrepareStamped != nil {
			t.Kind.PrepareStamped(obj)
		}
		return nil
	}})
	if err != nil {
		s.recordRejection(ctx, t, o, key.Name, "", err)
		return Result{}, err
	}
	if lc := t.Kind.Lifecycle; lc != nil {
		w, err := lc.BeforeWrite(ctx, obj, nil, o.DryRun)
		if err != nil {
			return Result{}, err
		}
		warnings = append(warnings, w...)
	}
	if err := beforeCommit(ctx); err != nil {
		return Result{}, err
	}
	if versioned {
		// kube-apiserver's storage refuses it, after admission, with a 500.
		return Result{}, serverError("resourceVersion should not be set on objects to be created")
	}
	stored, err := s.store(ctx, t.Kind, key, obj, o, generated)
	if err != nil {
		return Result{}, err
	}
	if lc := t.Kind.Lifecycle; lc != nil && !o.DryRun {
		if err := lc.AfterWrite(ctx, stored, false); err != nil {
			return Result{}, err
		}
	}
	s.recordWrite(ctx, t, o, stored, "Created", "Created")
	return Result{Object: stored, Warnings: warnings, Changed: true}, nil
}

// store creates obj, an object of k, at key (see storeNew). A generated name that is taken is
// generated again. The kind's Canonicalize runs before each attempt, on the name it will have.
func (s *Store) store(ctx context.Context, k *kinds.Kind, key cache.Key, obj map[string]any, o Options, generated bool) (*cache.Object, error) {
	return s.storeNew(ctx, k, key, o, func() (*cache.Object, error) {
		prefix := stringOf(metadataOf(obj)["generateName"])
		for attempt := 1; ; attempt++ {
			if k.Canonicalize != nil {
				k.Canonicalize(obj)
			}
			stored, err := s.cfg.Storage.Create(ctx, key, obj, storeOptions(k, o))
			if !generated || !errors.Is(err, cache.ErrAlreadyExists) || attempt == generateNameAttempts {
				return stored, err
			}
			key.Name = generateName(prefix)
			metadataOf(obj)["name"] = key.Name
		}
	})
}

// storeNew runs create, the storing of a new object of k at key, within the kind's Limit
// (room is made first: the oldest objects beyond it expire) and inside key's namespace.
func (s *Store) storeNew(ctx context.Context, k *kinds.Kind, key cache.Key, o Options, create func() (*cache.Object, error)) (*cache.Object, error) {
	if k.Limit == nil || o.DryRun {
		return s.inNamespace(ctx, key, create)
	}
	expire, done := k.Limit.Reserve()
	s.expire(ctx, k, expire)
	stored, err := s.inNamespace(ctx, key, create)
	if err != nil {
		s.expire(ctx, k, done(nil))
		return nil, err
	}
	s.expire(ctx, k, done(stored))
	return stored, nil
}

// inNamespace runs create, the storing of a new object at key, inside key's namespace (SPEC §2):
// holding the namespace's stripe shared, a missing namespace (404) or a Terminating one (403)
// refuses it.
func (s *Store) inNamespace(ctx context.Context, key cache.Key, create func() (*cache.Object, error)) (*cache.Object, error) {
	if key.Namespace != "" {
		unlock := s.lockNamespace(key.Namespace, false)
		defer unlock()
		if err := s.admitIntoNamespace(ctx, key, key.Name); err != nil {
			return nil, err
		}
	}
	return create()
}

// carriesVersion reports whether a client's create (not a dry run, not a server-side apply's)
// sends a resourceVersion its store would refuse: a number other than 0.
func carriesVersion(md map[string]any, o Options) bool {
	if o.Internal || o.DryRun || o.applying {
		return false
	}
	rv, err := cache.ParseResourceVersion(stringOf(md["resourceVersion"]))
	return err == nil && rv != 0
}
