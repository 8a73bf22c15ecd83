package fleet

import (
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/fleetpeek"
)

// The library's own tests look into the probe queue and the expiry warnings
// through fleetpeek
// (internal: not part of the API).
func init() {
	fleetpeek.ProbeEntries = func(engine any) int {
		q := &engine.(*Engine).health.queue
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.h)
	}
	fleetpeek.ExpiryWarning = func(engine any, name string) (time.Time, bool) {
		return engine.(*Engine).expiryWarning(name)
	}
}
