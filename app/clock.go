package app

import (
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// NewManualClock returns the clock of CLOCK=manual: it reads start until it is moved, and
// moves only by Step (POST /clock/advance), firing every timer then due. It is
// k8s.io/utils/clock's fake clock, the field's standard; its Sleep moves it, so no part of
// the server may sleep on it.
func NewManualClock(start time.Time) *testingclock.FakeClock {
	return testingclock.NewFakeClock(start)
}
