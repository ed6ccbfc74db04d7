package application

import (
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatusMapsAsItsJSON: statusOf and toMap, which read and build the decoded tree without
// encoding/json, agree with appStatus's JSON tags both ways.
func TestStatusMapsAsItsJSON(t *testing.T) {
	tests := []struct {
		name string
		st   appStatus
	}{
		{name: "zero"},
		{name: "pending", st: appStatus{ObservedGeneration: 1, Replicas: 3, Phase: "Pending",
			Conditions: []condition{{Type: "Ready", Status: "False", LastTransitionTime: "2026-01-02T03:04:05Z", Reason: "RolloutInProgress", Message: "Replicas are being rolled out", ObservedGeneration: 1}}}},
		{name: "running", st: appStatus{ObservedGeneration: 7, Replicas: 100, ReadyReplicas: 100, Phase: "Running", Conditions: []condition{
			{Type: "Ready", Status: "True", LastTransitionTime: "2026-01-02T03:04:05Z", Reason: "ReconciliationSucceeded", Message: "All replicas are ready", ObservedGeneration: 7},
			{Type: "Progressing", Status: "False"},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := json.Marshal(tt.st)
			require.NoError(t, err)
			got, err := json.Marshal(tt.st.toMap())
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(got), "toMap")

			app, err := cache.DecodeJSON([]byte(`{"status":` + string(want) + `}`))
			require.NoError(t, err)
			assert.Equal(t, tt.st, statusOf(app), "statusOf")
		})
	}
	assert.Equal(t, appStatus{}, statusOf(map[string]any{}), "no status")
	assert.Equal(t, appStatus{}, statusOf(map[string]any{"status": "malformed"}), "malformed status")
}
