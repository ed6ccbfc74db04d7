package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

func TestClockRoutes(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	manual := testingclock.NewFakeClock(start)
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.Clock, c.ManualClock = manual, manual })

	assert.JSONEq(t, `{"mode":"manual","now":"2026-11-24T09:00:00Z"}`, string(e.do("GET", "/clock", "", "").body))
	r := e.do("POST", "/clock/advance", "application/json", `{"by":"1m30s"}`)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.JSONEq(t, `{"mode":"manual","now":"2026-11-24T09:01:30Z"}`, string(r.body))
	assert.Equal(t, start.Add(90*time.Second), manual.Now())
	// A body without Content-Type is JSON, as for every write.
	assert.Equal(t, http.StatusOK, e.do("POST", "/clock/advance", "", `{"by":"500ms"}`).code)
	assert.Equal(t, start.Add(90*time.Second+500*time.Millisecond), manual.Now())

	for _, body := range []string{``, `{}`, `{"by":"-1s"}`, `{"by":"0s"}`, `{"by":"soon"}`, `{"by":30}`, `[`} {
		m := status(t, e.do("POST", "/clock/advance", "application/json", body), http.StatusBadRequest, "BadRequest")
		assert.Contains(t, m["message"], "by", "body %q", body)
	}
	assert.Equal(t, start.Add(90*time.Second+500*time.Millisecond), manual.Now(), "refused advances move nothing")

	realClock := newEnv(t)
	m := realClock.do("GET", "/clock", "", "").json(t)
	assert.Equal(t, "real", m["mode"])
	got, err := time.Parse(time.RFC3339Nano, m["now"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), got, time.Minute)
	m = status(t, realClock.do("POST", "/clock/advance", "application/json", `{"by":"30s"}`), http.StatusConflict, "Conflict")
	assert.Contains(t, m["message"], "CLOCK=manual")
}

// TestControllerRoutesWithoutController: without a controller there is nothing to pause.
func TestControllerRoutesWithoutController(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.do("GET", "/controller", "", "").json(t)
	assert.Equal(t, []any{}, m["controllers"])
	for _, action := range []string{"pause", "step", "resume"} {
		m := status(t, e.do("POST", "/controller/"+action, "", ""), http.StatusServiceUnavailable, "ServiceUnavailable")
		assert.Contains(t, m["message"], "ENABLE_CONTROLLER=false")
	}
}
