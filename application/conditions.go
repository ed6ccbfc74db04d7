package application

import (
	"encoding/json"
	"strconv"
)

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

// statusOf reads app["status"], a member of the pass's decoded object, as the reconciler's
// type: the values are read, nothing is decoded again or copied (absent or malformed: zero).
// The JSON shape is appStatus's tags; the schema has validated what is stored.
func statusOf(app map[string]any) appStatus {
	m, _ := app["status"].(map[string]any)
	st := appStatus{
		ObservedGeneration: int64Of(m["observedGeneration"]),
		Replicas:           int64Of(m["replicas"]),
		ReadyReplicas:      int64Of(m["readyReplicas"]),
		Phase:              stringOf(m["phase"]),
	}
	l, _ := m["conditions"].([]any)
	for _, e := range l {
		c, _ := e.(map[string]any)
		st.Conditions = append(st.Conditions, condition{
			Type: stringOf(c["type"]), Status: stringOf(c["status"]), LastTransitionTime: stringOf(c["lastTransitionTime"]),
			Reason: stringOf(c["reason"]), Message: stringOf(c["message"]), ObservedGeneration: int64Of(c["observedGeneration"]),
		})
	}
	return st
}

// toMap is st as the store's decoded JSON (appStatus's tags, numbers as json.Number, as the
// store decodes them, so the schema's quick check vouches for them without converting): a
// fresh tree the caller owns.
func (s appStatus) toMap() map[string]any {
	m := map[string]any{"replicas": number(s.Replicas), "readyReplicas": number(s.ReadyReplicas)}
	if s.ObservedGeneration != 0 {
		m["observedGeneration"] = number(s.ObservedGeneration)
	}
	setString(m, "phase", s.Phase)
	if len(s.Conditions) > 0 {
		l := make([]any, len(s.Conditions))
		for i, c := range s.Conditions {
			cm := map[string]any{"type": c.Type, "status": c.Status}
			setString(cm, "lastTransitionTime", c.LastTransitionTime)
			setString(cm, "reason", c.Reason)
			setString(cm, "message", c.Message)
			if c.ObservedGeneration != 0 {
				cm["observedGeneration"] = number(c.ObservedGeneration)
			}
			l[i] = cm
		}
		m["conditions"] = l
	}
	return m
}

func number(i int64) json.Number { return json.Number(strconv.FormatInt(i, 10)) }

// setString sets m[k] to v unless v is empty (omitempty).
func setString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
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
