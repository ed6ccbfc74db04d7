package leader

import (
	"encoding/json"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// record is the lease record as stored and shown: a coordination/v1 LeaseSpec's fields, with
// microsecond times so that every renewal changes the record's bytes (the elector judges a
// holder alive by seeing its record change).
type record struct {
	HolderIdentity       string           `json:"holderIdentity"`
	LeaseDurationSeconds int              `json:"leaseDurationSeconds"`
	AcquireTime          metav1.MicroTime `json:"acquireTime"`
	RenewTime            metav1.MicroTime `json:"renewTime"`
	LeaderTransitions    int              `json:"leaderTransitions"`
}

func toRecord(ler rl.LeaderElectionRecord) record {
	return record{
		HolderIdentity:       ler.HolderIdentity,
		LeaseDurationSeconds: ler.LeaseDurationSeconds,
		AcquireTime:          metav1.NewMicroTime(ler.AcquireTime.Time),
		RenewTime:            metav1.NewMicroTime(ler.RenewTime.Time),
		LeaderTransitions:    ler.LeaderTransitions,
	}
}

func (r record) election() *rl.LeaderElectionRecord {
	return &rl.LeaderElectionRecord{
		HolderIdentity:       r.HolderIdentity,
		LeaseDurationSeconds: r.LeaseDurationSeconds,
		AcquireTime:          metav1.NewTime(r.AcquireTime.Time),
		RenewTime:            metav1.NewTime(r.RenewTime.Time),
		LeaderTransitions:    r.LeaderTransitions,
	}
}

func (r record) encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

// leaseSpec is r as a coordination.k8s.io/v1 LeaseSpec (the Lease objects in the store: the
// memory backend's lock and the file backend's mirror), converted as client-go's LeaseLock
// does: leaseTransitions (the record's leaderTransitions), and acquireTime and renewTime as
// MicroTime (RFC 3339 with microseconds). The file and /leader keep the record's own shape.
func (r record) leaseSpec() map[string]any {
	b, _ := json.Marshal(rl.LeaderElectionRecordToLeaseSpec(r.election()))
	var spec map[string]any
	_ = json.Unmarshal(b, &spec)
	return spec
}

// recordFromLeaseSpec reads a Lease's spec (JSON) back into a record; a spec that does not
// decode gives the zero record (held by nobody).
func recordFromLeaseSpec(raw []byte) record {
	var spec coordinationv1.LeaseSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return record{}
	}
	return toRecord(*rl.LeaseSpecToLeaderElectionRecord(&spec))
}

// Info is the lease as /leader shows it.
type Info struct {
	HolderIdentity       string `json:"holderIdentity"`
	LeaseDurationSeconds int    `json:"leaseDurationSeconds"`
	AcquireTime          string `json:"acquireTime,omitempty"`
	RenewTime            string `json:"renewTime,omitempty"`
	LeaderTransitions    int    `json:"leaderTransitions"`
}

func (r record) info() *Info {
	i := &Info{HolderIdentity: r.HolderIdentity, LeaseDurationSeconds: r.LeaseDurationSeconds, LeaderTransitions: r.LeaderTransitions}
	if !r.AcquireTime.IsZero() {
		i.AcquireTime = r.AcquireTime.UTC().Format(time.RFC3339Nano)
	}
	if !r.RenewTime.IsZero() {
		i.RenewTime = r.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	return i
}
