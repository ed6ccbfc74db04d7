package kinds

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kind is one served version of a resource: everything the server needs to serve, check and
// show its objects. Only the names and scope are required; every other field is an optional
// capability whose zero value says the kind does not have it. Kinds are immutable once added to
// a Registry.
type Kind struct {
	Group, Version, Kind, ListKind, Plural, Singular string
	ShortNames, Categories                           []string
	Namespaced                                       bool
	// StorageVersion is the version the resource's objects are stored in. Empty means Version.
	StorageVersion string
	// CRDName is the CustomResourceDefinition that defines the kind; empty for built-in kinds.
	CRDName string

	// Status says the kind has the status subresource: writes to the main resource keep the
	// stored status, writes to /status change only status.
	Status bool
	// StatusOnCreate says a create keeps the status it is sent (a kubelet registers its Node
	// with its status); otherwise a kind with the status subresource starts without one.
	StatusOnCreate bool
	// StatusResets are the fields, as dotted paths, a write to /status does not change although
	// the write changes the rest of the object's metadata, as a built-in kind's status strategy
	// resets them (its GetResetFields): spec, and a Deployment's metadata.labels. Nil means a
	// write to /status changes status alone, as a custom resource's status strategy has it.
	StatusResets []string
	// Finalize says the kind has spec.finalizers and the finalize subresource, as a Namespace
	// has: only a write to /finalize changes spec.finalizers (PrepareForUpdate keeps them on
	// the main resource, the status subresource keeps the spec), and an object being deleted
	// is removed only once both its metadata.finalizers and its spec.finalizers are empty.
	Finalize bool
	// LabelsGeneration says a change of labels moves metadata.generation too, as a change of
	// spec does (an EndpointSlice's strategy).
	LabelsGeneration bool
	// Scale, when set, is the scale subresource (an autoscaling/v1 Scale view of these paths).
	Scale *apiextv1.CustomResourceSubresourceScale
	// Schema checks, prunes and defaults objects. Nil means the kind has no schema: metadata is
	// validated, everything else is kept as sent.
	Schema Schema
	// Columns are the Table columns (`kubectl get`), usually NameColumn first. Nil means Name
	// and Age.
	Columns []Column
	// StrategicPatch is a value of the Go type strategic merge patches of this kind follow
	// (e.g. &corev1.Event{}). Nil means the kind does not take them (415, as for custom
	// resources).
	StrategicPatch any
	// Fields are the field-selector fields beyond metadata.name and metadata.namespace, which
	// every kind has; the store indexes them on every write.
	Fields []Field
	// Protobuf says request bodies may be protobuf (the Registry decodes them); client-go sends
	// protobuf for built-in kinds.
	Protobuf bool
	// PrepareForCreate, when set, fills what the kind's API strategy fills on create before
	// validation (e.g. a Namespace's phase). It may change obj.
	PrepareForCreate func(obj map[string]any)
	// PrepareStamped, when set, fills on create what needs the new object's name and uid, once
	// the write path has set them and before validation (a Job's generated selector, as its
	// strategy's PrepareForCreate makes it). It may change obj.
	PrepareStamped func(obj map[string]any)
	// Canonicalize, when set, runs on creates and updates after validation, right before each
	// store write, as kube-apiserver's strategies' Canonicalize does: a name generateName made
	// is final only then (a Namespace's kubernetes.io/metadata.name label follows it). It may
	// change obj.
	Canonicalize func(obj map[string]any)
	// PrepareForUpdate, when set, fills what the kind's API strategy fills on update from the
	// stored object old (e.g. a Service keeps its allocated clusterIP when the update omits
	// it). It runs where kube-apiserver's BeforeUpdate does: after defaulting, the write's
	// managedFields and mutating admission, before validation, so what it fills is nobody's.
	// It may change obj, never old.
	PrepareForUpdate func(obj, old map[string]any)
	// PrepareStatusUpdate, when set, fills what a /status write leaves out, as the defaults of
	// the kind's request decoding would (a CRD's emptied status.storedVersions is its storage
	// version). It may change obj, never old.
	PrepareStatusUpdate func(obj, old map[string]any)
	// TypeConverter, when set, gives the structured-merge-diff types server-side apply merges
	// this kind's objects with (the real list and map keys): a built-in kind's from its Go type,
	// a custom resource's from its CRD's schema (built on first use). Nil means types deduced
	// from the objects: maps granular, lists atomic.
	TypeConverter managedfields.TypeConverter
	// ManagedConvertor, when set, converts the kind's objects between the versions of its
	// resource for its field managers, which compare an object in the version of each
	// managedFields entry (a CRD's conversion webhook, as kube-apiserver's custom resource
	// handler gives its field managers). Nil means only apiVersion changes, as a CRD's None
	// strategy converts.
	ManagedConvertor runtime.ObjectConvertor
	// ManagedView, when set, adds to obj, the copy of an object a create or update's field
	// manager compares (its object and metadata maps its own, the rest shared), what
	// kube-apiserver's conversion of the object into the kind's version adds before its field
	// manager sees it: a DaemonSet's template generation annotation, which apps/v1 always
	// carries, so that the write that creates a DaemonSet owns it.
	ManagedView func(obj map[string]any)
	// ManagedTypes, when set, gives the types the ownership of plain writes (creates, updates,
	// patches) is recorded with where TypeConverter is nil: a built-in kind whose objects carry
	// fields its Go type lacks (ManagedExtensions, left out of its ownership), so that server-side
	// apply merges it with deduced types.
	ManagedTypes      managedfields.TypeConverter
	ManagedExtensions []string
	// Conversion, when set, makes the kind a second view of another resource's objects (as
	// events.k8s.io/v1 Event is of v1 Event): they are stored in Conversion.Storage's form and
	// converted on every read and write.
	Conversion *Conversion
	// Upgrade, when set, converts a stored object written in another version of the kind's
	// resource (a CRD's former storage version) into this version on reads (get, list, watch,
	// Tables); objects already in this version are read as stored. The function gets a private
	// copy it may change.
	Upgrade func(obj map[string]any) (map[string]any, error)
	// Lifecycle, when set, takes part in the kind's writes beyond the schema (a
	// CustomResourceDefinition serves new kinds when stored).
	Lifecycle Lifecycle
	// TTL, when not zero, is how long an object of the kind lives after each write, as
	// kube-apiserver's registry store gives Events a TTL (its TTLFunc, --event-ttl). The store
	// decides how (cache.WriteOptions.TTL: an etcd lease; the in-memory store leaves it to the
	// kind's owner). Objects of a kind with a TTL may be expired (registry.Client.Expire).
	TTL time.Duration
	// Limit, when set, bounds how many objects of the kind are kept (the Event kind's
	// EVENT_LIMIT over the in-memory store). The write path asks it for room before every
	// create and tells it of every write and removal.
	Limit Limit

	// NameRule, when set, is the rule of the kind's names (and, with prefix, of its
	// generateName), as its API strategy's validation has it: a DNS label for Services and
	// Namespaces, any path segment for RBAC objects. Nil means NameIsDNSSubdomain, most kinds'.
	NameRule func(name string, prefix bool) []string
	// AllowCreateOnUpdate says a PUT of an object that does not exist creates it (kube-apiserver's
	// strategies' AllowCreateOnUpdate: Services, Endpoints, Events, Leases, RBAC objects).
	AllowCreateOnUpdate bool
	// ReturnDeletedObject says a DELETE that removes an object answers the object rather than a
	// Status (kube-apiserver's stores' ReturnDeletedObject: Pods, Services, PVCs...).
	ReturnDeletedObject bool
	// GracePeriod, when set, says the kind's objects are deleted gracefully, as Pods are (the
	// strategy's CheckGracefulDelete): it returns the grace period in seconds of a DELETE of
	// obj that asked for requested (nil: none given). A positive period marks the object
	// (deletionTimestamp that far ahead, deletionGracePeriodSeconds) and keeps it for whoever
	// stops it (a kubelet) to remove; a later DELETE may only shorten it. Zero removes it,
	// marked with its deletionTimestamp, a grace period of 0 and its generation moved, which
	// its DELETE answer and DELETED event show.
	GracePeriod func(obj map[string]any, requested *int64) int64
	// Schedulable says the kind's objects are bound to Nodes and evicted, as Pods are: it
	// serves the binding (v1 Binding) and eviction (policy/v1 Eviction) subresources.
	Schedulable bool
	// DeletePropagation, when set, is the propagation policy of a DELETE that gives none, for
	// an object that has no garbage collector finalizer yet (the strategy's
	// DefaultGarbageCollectionPolicy: Orphan for batch/v1 Jobs); DeleteWarning is the warning
	// such a DELETE gets.
	DeletePropagation metav1.DeletionPropagation
	DeleteWarning     string
	// Warning, when set, is sent with every request of this version of the kind (a
	// deprecation: "v1 Endpoints is deprecated in v1.33+; ...").
	Warning string
}

// NameValidator is the rule of the kind's names: NameRule, or NameIsDNSSubdomain.
func (k *Kind) NameValidator() func(name string, prefix bool) []string {
	if k.NameRule != nil {
		return k.NameRule
	}
	return NameIsDNSSubdomain
}

// Warner is implemented by schemas that warn about objects they accept (kube-apiserver's
// strategies' WarningsOnCreate and WarningsOnUpdate): the write path sends the warnings of every
// create and update that passed validation.
type Warner interface {
	Warnings(obj map[string]any) []string
}

// Schema validates, prunes and defaults the objects of a kind, as Kubernetes does for a
// structural schema.
type Schema interface {
	// Prune removes, in place, every field the schema does not know and returns their dotted
	// paths, sorted ("spec.foo").
	Prune(obj map[string]any) []string
	// Default applies the schema's defaults in place.
	Default(obj map[string]any)
	// Validate checks obj (metadata excepted) and returns one error per failing field.
	Validate(obj map[string]any) field.ErrorList
	// OpenAPI returns the schema as served in /openapi/v3 (kubectl explain, client validation).
	OpenAPI() *apiextv1.JSONSchemaProps
}

// UpdateSchema is a Schema whose rules read the stored object on updates (a CRD's CEL
// transition rules, validation ratcheting; a built-in kind's immutable fields). The write path calls ValidateUpdate instead of
// Validate for every write of an existing object: update, patch, apply and the subresources.
type UpdateSchema interface {
	// ValidateUpdate checks obj (metadata excepted), which replaces old; sub is the
	// subresource written ("", "status" or "scale"). Neither object is modified. The warnings
	// are failures let through (a rule ratcheted: old broke it the same way).
	ValidateUpdate(obj, old map[string]any, sub string) (field.ErrorList, []string)
}

// Lifecycle lets a kind act on the writes of its objects: the part of an API strategy that
// changes what the server itself does. Every method is called by the write path only, with no
// lock held.
type Lifecycle interface {
	// BeforeWrite is called on create (old is nil) and update after admission and validation,
	// before the store write. It may rewrite obj into its stored form and returns warnings. On a
	// dry run it must change nothing outside obj.
	BeforeWrite(ctx context.Context, obj, old map[string]any, dryRun bool) ([]string, error)
	// BeforeDelete may refuse to delete the object name (an error with its Status).
	BeforeDelete(ctx context.Context, name string) error
	// AfterWrite is called once obj has been stored (removed: it is gone; a delete that only
	// marked it calls it with obj marked). An error is returned to the client, though the
	// write stands.
	AfterWrite(ctx context.Context, obj *cache.Object, removed bool) error
}

// Limit keeps the number of a kind's objects bounded, oldest first. The write path calls it
// around every create (not dry runs), after every update and after every removal of the kind's
// objects, with no lock held. An object it gives back to expire is removed as an expiry is: at
// once, whatever its finalizers, with no admission (registry.Client.Expire).
type Limit interface {
	// Reserve makes room for one object about to be created: expire are the objects to remove
	// first (forgotten already), and done must be called exactly once when the create is
	// decided, with the stored object (nil when the create failed); what done returns is to
	// expire too (creates running at once may have left no room to make before).
	Reserve() (expire []cache.Key, done func(stored *cache.Object) (expire []cache.Key))
	// Updated tells it obj, one of its objects, was written again (its age may have changed).
	Updated(obj *cache.Object)
	// Removed tells it the object at key is gone.
	Removed(key cache.Key)
}

// DeleteMarker is a Lifecycle whose objects a delete marks the kind's own way, as
// kube-apiserver's CRD storage marks a deleted CRD: MarkDeleted changes obj, the stored object
// about to get its deletionTimestamp (a finalizer of the kind's, a status condition), and the
// kind's AfterWrite, called with the marked object, cleans up and removes that finalizer. Such
// a mark sets no deletionGracePeriodSeconds and keeps the generation.
type DeleteMarker interface {
	MarkDeleted(obj map[string]any)
}

// Conversion makes a kind a view of objects stored as another kind (Storage's storage version).
// Reads convert stored objects with FromStorage; writes convert the view's object with
// ToStorage and then follow the stored kind's rules (admission, metadata, lifecycle). Both
// functions get private copies they may change and return the converted object with its
// apiVersion and kind.
type Conversion struct {
	Storage cache.GroupResource
	// ToStorage converts obj into the stored form; old is the stored object it replaces (nil on
	// create), so fields the view cannot express are kept.
	ToStorage func(obj, old map[string]any) (map[string]any, error)
	// FromStorage converts a stored object into the view.
	FromStorage func(obj map[string]any) (map[string]any, error)
	// FieldLabels maps the view's field selector labels to the stored kind's.
	FieldLabels map[string]string
}

// Field is one selectable field: its name in field selectors and where its value is.
type Field struct {
	// Name is the selector's name, e.g. "involvedObject.name" or "status.phase".
	Name string
	// Path is the value's location; empty means the same as Name ("a.b" is obj.a.b).
	Path string
	// Default is the value when the path is absent (a false boolean that omitempty leaves
	// out of the object is "false" to a selector, as the Go type's field is to kube-apiserver).
	Default string
}

// Column is one Table column and how to fill its cell from a decoded object.
type Column struct {
	Def metav1.TableColumnDefinition
	// Doc, when Def has no Description, names the one kube-apiserver's printers give the column:
	// a Go type's OpenAPI name and one of its fields, whose SwaggerDoc it is (read on first use,
	// see swaggerdoc.go).
	Doc  [2]string
	Cell func(obj map[string]any, now time.Time) any
}

// Definition is the column's definition, its description included.
func (c Column) Definition() metav1.TableColumnDefinition {
	d := c.Def
	if d.Description == "" && c.Doc[0] != "" {
		d.Description = docTable{}.of(c.Doc[0])[c.Doc[1]]
	}
	return d
}

// GroupVersion returns "group/version" (just "version" for the core group).
func (k *Kind) GroupVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// GroupResource is where the kind's objects are stored: its own resource, or for a view the
// resource it is a view of.
func (k *Kind) GroupResource() cache.GroupResource {
	if k.Conversion != nil {
		return k.Conversion.Storage
	}
	return cache.GroupResource{Group: k.Group, Resource: k.Plural}
}

// ConvertsReads reports whether reads of the kind may convert stored objects (a view, or a
// kind with Upgrade).
func (k *Kind) ConvertsReads() bool { return k.Conversion != nil || k.Upgrade != nil }

// BuiltIn reports whether the kind is one of the server's own rather than defined by a CRD.
func (k *Kind) BuiltIn() bool { return k.CRDName == "" }

// FieldSet returns the values of the kind's selectable fields in obj ("" when absent); strings
// as they are, numbers and booleans as their JSON text.
func (k *Kind) FieldSet(obj map[string]any) fields.Set {
	if len(k.Fields) == 0 {
		return nil
	}
	pairs := k.AppendFields(nil, obj)
	set := make(fields.Set, len(k.Fields))
	for i := 0; i < len(pairs); i += 2 {
		set[pairs[i]] = pairs[i+1]
	}
	return set
}

// AppendFields appends FieldSet's names and values to dst as name, value, name, value, ...,
// in the order of k.Fields, without building a map (the store indexes every write this way).
// The names are k.Fields' own strings.
func (k *Kind) AppendFields(dst []string, obj map[string]any) []string {
	if len(k.Fields) == 0 {
		return dst
	}
	if dst == nil {
		dst = make([]string, 0, 2*len(k.Fields))
	}
	for _, f := range k.Fields {
		p := f.Path
		if p == "" {
			p = f.Name
		}
		v := fieldValue(obj, p)
		if v == "" && f.Default != "" {
			if _, present := ValueAt(obj, p); !present {
				v = f.Default
			}
		}
		dst = append(dst, f.Name, v)
	}
	return dst
}

// ConvertFieldLabel checks a field selector's label as kube-apiserver's scheme does for the
// kind, and returns it: metadata.name always; metadata.namespace, and the kind's own fields
// (Fields, a view's FieldLabels). A kind with fields of its own (a CRD's kinds, the built-ins
// kube-apiserver registers a conversion for) takes metadata.namespace only when namespaced and
// refuses others with "field label not supported"; the other built-ins take metadata.name and
// metadata.namespace alone, with apimachinery's default conversion and its message.
func (k *Kind) ConvertFieldLabel(label, value string) (string, string, error) {
	own := !k.BuiltIn() || len(k.Fields) > 0 || k.Conversion != nil
	if !own {
		return runtime.DefaultMetaV1FieldSelectorConversion(label, value)
	}
	switch {
	case label == "metadata.name", label == "metadata.namespace" && k.Namespaced:
		return label, value, nil
	case k.Conversion != nil:
		if _, ok := k.Conversion.FieldLabels[label]; ok {
			return label, value, nil
		}
	default:
		for _, f := range k.Fields {
			if f.Name == label {
				return label, value, nil
			}
		}
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

// ValueAt is the value at a dotted path like ".spec.replicas" (the leading dot optional) in a
// decoded object. It runs on every write of kinds with selectable fields, so it walks the path
// without splitting it.
func ValueAt(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	rest := strings.TrimPrefix(path, ".")
	for rest != "" {
		var key string
		key, rest, _ = strings.Cut(rest, ".")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// fieldValue is the selector value of the field at path: strings as they are, numbers and
// booleans as their JSON text, "" when absent or not a scalar.
func fieldValue(obj map[string]any, path string) string {
	cur, _ := ValueAt(obj, path)
	switch v := cur.(type) {
	case string:
		return v
	case nil:
		return ""
	case map[string]any, []any:
		return ""
	case json.Number:
		return v.String()
	case bool:
		if v {
			return "true"
		}
		return "false"
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
