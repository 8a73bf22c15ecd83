package fleet

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// ReadLocked runs f while the engine's lock is read-locked, as by a
// reconciler's Get.
func (e *Engine) ReadLocked(f func()) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	f()
}

// ProbeOnce probes cl's /readyz once, as the engine does.
func ProbeOnce(ctx context.Context, cl cluster.Cluster) error {
	in := &instance{cl: cl}
	if res, err := readyz(ctx, in, DefaultProbeTimeout); res != probeOK {
		return err
	}
	return nil
}
