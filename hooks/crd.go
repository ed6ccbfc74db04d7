package hooks

import (
	"github.com/opemu/opemu/cache"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
	"sync"
)

// CRDName is the name of the built-in Controller CRD, which cannot be replaced or deleted.
const CRDName = "controllers.controllers.opemu.dev"

// Resource is where Controllers are stored (cluster-scoped).
var Resource = cache.GroupResource{Group: "controllers.opemu.dev", Resource: "controllers"}

// controllerYAML is the built-in Controller CRD (SPEC §15) in Kubernetes shape.
const controllerYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: controllers.controllers.opemu.dev
spec:
  group: controllers.opemu.dev
  scope: Cluster
  names:
    kind: Controller
    listKind: ControllerList
    plural: controllers
    singular: controller
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - {name: Resource, type: string, jsonPath: .spec.resource.plural, description: The resource reconciled}
    - {name: Group, type: string, jsonPath: .spec.resource.group, description: Its API group}
    - {name: Hook, type: string, jsonPath: .spec.hook.url, description: The reconcile hook called}
    - {name: Phase, type: string, jsonPath: .status.phase, description: "Running, Waiting or Invalid"}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: >-
          Controller reconciles the objects of one resource with your code: for each object that
          changes (and at every resync), opemu POSTs {controller, object, children, attempt,
          finalizing} to the hook's URL and applies its answer {status, children,
          requeueAfterSeconds, events, finalized}, with the work queue, backoff and retries of
          opemu's own controller, only on the leader. Create it to start reconciling, change it to
          change the hook at once, delete it to stop.
        required: [spec]
        properties:
          apiVersion: {type: string, description: APIVersion defines the versioned schema of this representation of an object.}
          kind: {type: string, description: Kind is a string value representing the REST resource this object represents.}
          metadata: {type: object}
          spec:
            type: object
            description: What is reconciled, by which hook, managing which children.
            required: [resource, hook]
            properties:
              resource:
                type: object
                description: The resource whose objects are reconciled (a CRD's, or a built-in one).
                required: [version, plural]
                properties:
                  group: {type: string, description: 'API group ("" is the core group).'}
                  version: {type: string, minLength: 1, description: The version objects are sent to the hook in.}
                  plural: {type: string, minLength: 1, description: 'Resource, plural and lower case, e.g. databaseclusters.'}
              hook:
                type: object
                description: The reconcile hook.
                required: [url]
                properties:
                  url:
                    type: string
                    pattern: '^https?://'
                    description: The URL opemu POSTs each reconcile to (http or https).
                  timeoutSeconds:
                    type: integer
                    minimum: 1
                    maximum: 60
                    default: 10
                    description: How long a call may take; a slower one is a failed reconcile.
                  caBundle:
                    type: string
                    format: byte
                    description: PEM certificates (base64) that sign an https hook's certificate. Default the system's roots.
              children:
                type: array
                description: >-
                  The kinds of children the hook may manage. Children are created, updated and
                  deleted to match the hook's answer, each with an ownerReference to its object,
                  so the garbage collector removes them with it. A child of another kind is a bad
                  answer.
                items:
                  type: object
                  required: [apiVersion]
                  properties:
                    apiVersion: {type: string, minLength: 1, description: 'The child API version, e.g. v1 or apps/v1.'}
                    kind: {type: string, description: 'The child kind, e.g. ConfigMap (or give resource).'}
                    resource: {type: string, description: 'The child resource, e.g. configmaps (or give kind).'}
              finalize:
                type: boolean
                default: false
                description: >-
                  Keep a finalizer on every object and call the hook with finalizing true when it is
                  deleted, until the hook answers finalized true.
              resyncPeriodSeconds:
                type: integer
                minimum: 0
                description: Reconcile every object this often (0 never). Default RECONCILE_INTERVAL.
          status:
            type: object
            description: Whether the controller runs, written by opemu.
            properties:
              observedGeneration: {type: integer, description: The generation of the spec being applied.}
              phase:
                type: string
                enum: [Running, Waiting, Invalid]
                description: >-
                  Running when its queue runs on the leader; Waiting while the resource or a child
                  kind is not served; Invalid when it cannot run (the message says why).
              conditions:
                type: array
                description: Ready says whether the controller runs and why not.
                items:
                  type: object
                  required: [type, status]
                  properties:
                    type: {type: string}
                    status: {type: string, enum: ["True", "False", "Unknown"]}
                    reason: {type: string}
                    message: {type: string}
                    lastTransitionTime: {type: string, format: date-time}
                    observedGeneration: {type: integer}
`

// CRD returns a fresh copy of the built-in Controller CRD.
func CRD() *apiextv1.CustomResourceDefinition { return controllerCRD().DeepCopy() }

// controllerCRD is the CRD parsed once (a constant of the process, read only; parsing it took
// most of a testenv start).
var controllerCRD = sync.OnceValue(func() *apiextv1.CustomResourceDefinition {
	var c apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(controllerYAML), &c); err != nil {
		panic("hooks: the built-in Controller CRD does not parse: " + err.Error())
	}
	return &c
})
