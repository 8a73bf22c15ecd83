package fleet

import "github.com/mcruntime/multicluster-runtime/internal/fleetpeek"

// The library's own tests look into the probe queue through fleetpeek
// (internal: not part of the API).
func init() {
	fleetpeek.ProbeEntries = func(engine any) int {
		q := &engine.(*Engine).health.queue
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.h)
	}
}
