package faults

import (
	"github.com/opemu/opemu/cache"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
	"sync"
)

// CRDName is the name of the built-in Fault CRD, which cannot be replaced or deleted.
const CRDName = "faults.faults.opemu.dev"

// Resource is where Faults are stored (cluster-scoped). Requests to it are never faulted, so a
// Fault can always be changed or deleted.
var Resource = cache.GroupResource{Group: "faults.opemu.dev", Resource: "faults"}

// durationPattern is what time.ParseDuration accepts, without a sign: "300ms", "1m30s".
const durationPattern = `^([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`

// faultYAML is the built-in Fault CRD (SPEC §16) in Kubernetes shape.
const faultYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: faults.faults.opemu.dev
spec:
  group: faults.opemu.dev
  scope: Cluster
  names:
    kind: Fault
    listKind: FaultList
    plural: faults
    singular: fault
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - {name: Verbs, type: string, jsonPath: .spec.match.verbs, description: Verbs matched (all when empty)}
    - {name: Resource, type: string, jsonPath: .spec.match.resource, description: Resource matched (all when empty)}
    - {name: Status, type: integer, jsonPath: .spec.action.status, description: Error status answered}
    - {name: Delay, type: string, jsonPath: .spec.action.delay, description: Delay added}
    - {name: Injected, type: integer, jsonPath: .status.injected, description: Faults injected so far}
    - {name: Phase, type: string, jsonPath: .status.phase, description: "Active, Exhausted, Expired or Invalid"}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: >-
          Fault makes the API misbehave on purpose for client requests that match it (kubectl,
          client-go, controller-runtime, the SSE stream; never opemu's own controller): an error
          status, a delay, or a watch that ends. An injected error happens before anything is
          written. Create it to turn it on, delete it to turn it off.
        required: [spec]
        properties:
          apiVersion: {type: string, description: APIVersion defines the versioned schema of this representation of an object.}
          kind: {type: string, description: Kind is a string value representing the REST resource this object represents.}
          metadata: {type: object}
          spec:
            type: object
            description: Which requests are faulted, how, how often and until when.
            required: [action]
            properties:
              match:
                type: object
                description: >-
                  Which requests the fault applies to. Every field given must match; a field left
                  out matches anything. Requests to Faults themselves are never faulted.
                properties:
                  verbs:
                    type: array
                    description: Request verbs, as RBAC names them. Empty means every verb.
                    items:
                      type: string
                      enum: [get, list, watch, create, update, patch, delete, deletecollection]
                  group: {type: string, description: 'API group ("" is the core group).'}
                  resource: {type: string, description: 'Resource, plural and lower case, e.g. applications.'}
                  subresource: {type: string, description: 'Subresource, e.g. status or scale ("" is the main resource only).'}
                  namespace: {type: string, description: Namespace of the request.}
                  name: {type: string, description: Name of the object.}
                  userAgentPrefix: {type: string, description: 'Start of the User-Agent header, e.g. kubectl or my-operator.'}
              action:
                type: object
                description: What happens to a matching request; at least one of status, delay and watch.
                minProperties: 1
                properties:
                  status:
                    type: integer
                    enum: [409, 410, 429, 500, 503, 504]
                    description: >-
                      Answer with this error status (a Kubernetes Status with its reason) instead of
                      carrying the request out.
                  message: {type: string, description: Added to the error's message.}
                  retryAfterSeconds:
                    type: integer
                    minimum: 0
                    description: Retry-After of the error (and details.retryAfterSeconds). Default 1 for 429 and 503.
                  delay:
                    type: string
                    pattern: '` + durationPattern + `'
                    description: Wait this long before answering (Go duration, e.g. 300ms).
                  watch:
                    type: object
                    description: For watch requests (Kubernetes watch and SSE) that are let through.
                    properties:
                      closeAfter:
                        type: string
                        pattern: '` + durationPattern + `'
                        description: End the stream this long after it started (Go duration). Default 0.
                      expire:
                        type: boolean
                        description: Send an ERROR event with a 410 Expired Status before ending it (the client must relist).
              probability:
                type: number
                minimum: 0
                maximum: 1
                description: Chance that a matching request is faulted. Default 1.
              every:
                type: integer
                minimum: 1
                description: Consider only every Nth matching request (the Nth, 2Nth, ...). Default 1.
              count:
                type: integer
                minimum: 1
                description: Inject at most this many faults, then the Fault is Exhausted. Default unlimited.
              expiresAfter:
                type: string
                pattern: '` + durationPattern + `'
                description: The Fault stops this long after its creation (Go duration).
              expiresAt:
                type: string
                format: date-time
                description: The Fault stops at this time (RFC 3339).
          status:
            type: object
            description: What the fault did, written by opemu.
            properties:
              observedGeneration: {type: integer, description: The generation of the spec being applied.}
              injected: {type: integer, description: Faults injected so far.}
              phase:
                type: string
                enum: [Active, Exhausted, Expired, Invalid]
                description: Active while it may inject; Exhausted after count; Expired after its expiry; Invalid when it cannot be applied.
              message: {type: string, description: Why the Fault is Invalid.}
              lastInjectionTime: {type: string, format: date-time, description: When the last fault was injected.}
`

// CRD returns a fresh copy of the built-in Fault CRD.
func CRD() *apiextv1.CustomResourceDefinition { return faultCRD().DeepCopy() }

// faultCRD is the CRD parsed once (a constant of the process, read only; parsing it took
// most of a testenv start).
var faultCRD = sync.OnceValue(func() *apiextv1.CustomResourceDefinition {
	var c apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(faultYAML), &c); err != nil {
		panic("faults: the built-in Fault CRD does not parse: " + err.Error())
	}
	return &c
})
