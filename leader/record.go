package leader

import (
	"encoding/json"
	"time"

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
