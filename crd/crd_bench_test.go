package crd_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"sigs.k8s.io/yaml"
)

const benchApp = `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"bench"},
	"spec":{"replicas":3,"image":"nginx:1.27","strategy":"RollingUpdate","config":{"a":"b"},"resources":{"limits":{"cpu":"1","memory":"1Gi"}}},
	"status":{"phase":"Running","replicas":3,"readyReplicas":3,"conditions":[{"type":"Ready","status":"True","reason":"ReconciliationSucceeded"}]}}`

func benchKind(b *testing.B) kinds.Schema { return applicationKind(b).Schema }

func BenchmarkCRDValidate(b *testing.B) {
	k := benchKind(b)
	obj := decode(b, benchApp)
	b.ReportAllocs()
	for b.Loop() {
		if errs := k.Validate(obj); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkCRDPruneDefault(b *testing.B) {
	k := benchKind(b)
	obj := decode(b, benchApp)
	b.ReportAllocs()
	for b.Loop() {
		k.Prune(obj)
		k.Default(obj)
	}
}

// serviceCRD is a CRD as kubebuilder writes one, RULES replaced by its spec's
// x-kubernetes-validations.
const serviceCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: services.bench.example.com}
spec:
  group: bench.example.com
  scope: Namespaced
  names: {kind: Service, plural: services}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            RULES
            properties:
              image: {type: string, maxLength: 256}
              region: {type: string, maxLength: 32}
              minReplicas: {type: integer, minimum: 0, default: 1}
              maxReplicas: {type: integer, minimum: 0, default: 3}
              ports:
                type: array
                maxItems: 8
                items:
                  type: object
                  required: [name, port]
                  properties:
                    name: {type: string, maxLength: 15}
                    port: {type: integer}
              labels: {type: object, maxProperties: 16, additionalProperties: {type: string, maxLength: 63}}
          status:
            type: object
            properties:
              ready: {type: boolean}
`

// fiveRules are five rules of the kinds CRDs carry: cross-field, a transition rule, over a
// list, over a map's keys, on an optional field.
const fiveRules = `x-kubernetes-validations:
            - {rule: "self.minReplicas <= self.maxReplicas", message: "minReplicas must not exceed maxReplicas"}
            - {rule: "self.region == oldSelf.region", message: "region is immutable"}
            - {rule: "self.ports.all(p, p.port >= 1 && p.port <= 65535)", message: "ports are 1 to 65535"}
            - {rule: "self.labels.all(k, !k.startsWith('kubernetes.io/'))", message: "reserved label"}
            - {rule: "!has(self.image) || self.image.contains(':')", messageExpression: "'image ' + self.image + ' has no tag'"}`

// BenchmarkCreateCustomResource is a create of a custom resource through the write path
// (pruning, defaulting, admission, metadata and schema validation, the memory store), its
// CRD's schema without CEL rules and with five (SPEC §19: at most 1.5 times the cost).
func BenchmarkCreateCustomResource(b *testing.B) {
	for _, tc := range []struct{ name, rules string }{{"rules=0", ""}, {"rules=5", fiveRules}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			env := registrytest.New(b, registrytest.Options{})
			var def map[string]any
			if err := yaml.Unmarshal([]byte(strings.Replace(serviceCRD, "RULES", tc.rules, 1)), &def); err != nil {
				b.Fatal(err)
			}
			if _, err := env.Registry.Client("bench").Create(ctx, cache.Key{Group: crd.Resource.Group, Resource: crd.Resource.Resource, Name: "services.bench.example.com"}, def); err != nil {
				b.Fatal(err)
			}
			t, err := env.Registry.TargetOf(cache.Key{Group: "bench.example.com", Resource: "services", Namespace: "default"})
			if err != nil {
				b.Fatal(err)
			}
			body := `{"apiVersion":"bench.example.com/v1","kind":"Service","metadata":{"name":"NAME","labels":{"app":"web"}},
				"spec":{"image":"registry.example.com/web:1.2","region":"eu-west-1","minReplicas":2,"maxReplicas":5,
				"ports":[{"name":"http","port":80},{"name":"https","port":443}],"labels":{"team":"a","tier":"web"}}}`
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				obj := decode(b, strings.Replace(body, "NAME", "s"+strconv.Itoa(i), 1))
				if _, err := env.Registry.Create(ctx, t, obj, registry.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
