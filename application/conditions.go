package application

import "encoding/json"

// condition is one entry of status.conditions.
type condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

// appStatus is the Application status the reconciler writes.
type appStatus struct {
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	Replicas           int64       `json:"replicas"`
	ReadyReplicas      int64       `json:"readyReplicas"`
	Phase              string      `json:"phase,omitempty"`
	Conditions         []condition `json:"conditions,omitempty"`
}

// setCondition sets a condition; lastTransitionTime moves only when its status changes.
func (s *appStatus) setCondition(typ, status, reason, message string, gen int64, now string) {
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != typ {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.ObservedGeneration = status, reason, message, gen
		return
	}
	s.Conditions = append(s.Conditions, condition{typ, status, now, reason, message, gen})
}

func (s *appStatus) condition(typ string) *condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}

// statusOf decodes obj["status"] (absent or malformed: zero).
func statusOf(obj map[string]any) appStatus {
	var st appStatus
	if raw, err := json.Marshal(obj["status"]); err == nil {
		_ = json.Unmarshal(raw, &st)
	}
	return st
}

// toMap encodes st as the decoded JSON the store takes.
func (s appStatus) toMap() map[string]any {
	raw, _ := json.Marshal(s)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

func int64Of(v any) int64 {
	switch n := v.(type) {
	case json.Number:
		i, _ := n.Int64()
		return i
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}
