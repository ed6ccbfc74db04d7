package application

import (
	"context"

	"github.com/opemu/opemu/webhooks"
)

// The defaulter's shortcut on the write path (webhooks.InPlace, Chain.Apply): its changes made
// to the object directly, without building the JSON Patch that AdmissionReview needs or
// copying its values. FuzzDefaulterInPlace holds it to applying defaultApplication's patch.

// HandleInPlace makes defaultApplication's changes to req.Object.
func (defaulter) HandleInPlace(_ context.Context, req *webhooks.Request) webhooks.Response {
	obj := req.Object
	spec, specOK := obj["spec"].(map[string]any)
	if !specOK && obj["spec"] == nil {
		obj["spec"] = map[string]any{"strategy": "RollingUpdate"}
	} else if specOK {
		if s, _ := spec["strategy"].(string); s == "" {
			spec["strategy"] = "RollingUpdate"
		}
	}
	md, mdOK := obj["metadata"].(map[string]any)
	if !mdOK {
		obj["metadata"] = map[string]any{
			"labels":      map[string]any{managedByLabel: managedByValue},
			"annotations": map[string]any{mutatedAnnotaton: "true"},
		}
		return webhooks.Allowed()
	}
	setMapEntryInPlace(md, "labels", managedByLabel, managedByValue)
	setMapEntryInPlace(md, "annotations", mutatedAnnotaton, "true")
	return webhooks.Allowed()
}

// setMapEntryInPlace makes metadata[field][key] == value, as setMapEntry's ops would.
func setMapEntryInPlace(md map[string]any, field, key, value string) {
	if m, ok := md[field].(map[string]any); ok {
		m[key] = value
		return
	}
	md[field] = map[string]any{key: value}
}
