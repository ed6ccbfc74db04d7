package application

import (
	"github.com/opemu/opemu/cache"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
	"sync"
)

// CRDName is the name of the built-in Application CRD, which cannot be replaced or deleted.
const CRDName = "applications.cloudnative.elide.dev"

// Resource is where Applications are stored, and the resource the controller reconciles.
var Resource = cache.GroupResource{Group: "cloudnative.elide.dev", Resource: "applications"}

// applicationYAML is the built-in Application CRD (SPEC §3) in Kubernetes shape.
const applicationYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: applications.cloudnative.elide.dev
spec:
  group: cloudnative.elide.dev
  scope: Namespaced
  names:
    kind: Application
    listKind: ApplicationList
    plural: applications
    singular: application
    shortNames: [app, apps]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas, description: Desired replicas}
    - {name: Ready, type: integer, jsonPath: .status.readyReplicas, description: Ready replicas}
    - {name: Phase, type: string, jsonPath: .status.phase, description: Lifecycle phase}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    selectableFields:
    - {jsonPath: .status.phase}
    schema:
      openAPIV3Schema:
        type: object
        description: Application is a containerised application that the operator rolls out.
        required: [spec]
        properties:
          apiVersion: {type: string, description: APIVersion defines the versioned schema of this representation of an object.}
          kind: {type: string, description: Kind is a string value representing the REST resource this object represents.}
          metadata: {type: object}
          spec:
            type: object
            description: Desired state of the Application.
            required: [replicas, image]
            properties:
              replicas:
                type: integer
                minimum: 0
                maximum: 100
                description: Number of replicas to run (0 to 100; use an HPA for more).
              image:
                type: string
                minLength: 1
                description: Container image, normalised as Docker does (nginx means docker.io/library/nginx:latest).
              strategy:
                type: string
                enum: [RollingUpdate, Recreate]
                default: RollingUpdate
                description: How a new version replaces the old one.
              config:
                type: object
                description: Configuration passed to the application.
                additionalProperties: {type: string}
              resources:
                type: object
                description: Compute resources per replica.
                properties:
                  requests:
                    type: object
                    description: Minimum resources.
                    properties:
                      cpu: {type: string, description: "CPU, e.g. 250m."}
                      memory: {type: string, description: "Memory, e.g. 128Mi."}
                  limits:
                    type: object
                    description: Maximum resources.
                    properties:
                      cpu: {type: string, description: "CPU, e.g. 500m."}
                      memory: {type: string, description: "Memory, e.g. 256Mi."}
          status:
            type: object
            description: Observed state of the Application, written by the controller.
            properties:
              observedGeneration: {type: integer, description: The generation the controller last acted on.}
              replicas: {type: integer, description: Replicas the controller is rolling out.}
              readyReplicas: {type: integer, description: Replicas ready to serve.}
              phase:
                type: string
                enum: [Pending, Running, Failed, Succeeded]
                description: Lifecycle phase.
              conditions:
                type: array
                description: Latest observations of the Application's state.
                items:
                  type: object
                  required: [type, status]
                  properties:
                    type: {type: string, description: "Condition type, e.g. Ready or Progressing."}
                    status:
                      type: string
                      enum: ["True", "False", "Unknown"]
                      description: Status of the condition.
                    lastTransitionTime: {type: string, format: date-time, description: When the status last changed.}
                    reason: {type: string, description: Machine-readable reason.}
                    message: {type: string, description: Human-readable message.}
                    observedGeneration: {type: integer, description: Generation the condition was set for.}
`

// CRD returns a fresh copy of the built-in Application CRD.
func CRD() *apiextv1.CustomResourceDefinition { return applicationCRD().DeepCopy() }

// applicationCRD is the CRD parsed once (a constant of the process, read only; parsing it took
// most of a testenv start).
var applicationCRD = sync.OnceValue(func() *apiextv1.CustomResourceDefinition {
	var c apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(applicationYAML), &c); err != nil {
		panic("application: the built-in Application CRD does not parse: " + err.Error())
	}
	return &c
})
