package builder

import (
	"fmt"

	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
)

// WithHostReconcilesOnHostOwner says whether the controller's host
// reconciles (requests with ClusterName "") write only to the host. If they
// do, under sharding (mcmanager.WithSharding) they run on the replica that
// owns the host's work alone, which holds the host's fence while it does:
// a status roll-up or a hub object's finalizer is written by one replica,
// never by two at once, and moves with the host on hand-off. Its watches of
// the host run on that replica only.
//
// The default is false: every replica receives the host's events, which is
// what a hub-to-fleet fan-out needs (each replica writes the hub object's
// copies into the members it owns; served by one replica, the members of
// the others would go stale). Without sharding the option changes nothing.
func (b *TypedBuilder[request]) WithHostReconcilesOnHostOwner(hostOnly bool) *TypedBuilder[request] {
	b.hostOwnerOnly = hostOnly
	return b
}

// newController creates the controller, applies the options that must be
// set before it starts, and adds it to the manager.
func (b *TypedBuilder[request]) newController(name string, options mccontroller.TypedOptions[request]) (mccontroller.TypedController[request], error) {
	options.DefaultFromConfig(b.mgr.GetControllerOptions())
	ctrl, err := mccontroller.NewTypedUnmanaged(name, b.mgr, options)
	if err != nil {
		return nil, err
	}
	if b.hostOwnerOnly {
		if err := mccontroller.ServeHostOnHostOwner(ctrl); err != nil {
			return nil, fmt.Errorf("mcbuilder: controller %q: %w", name, err)
		}
	}
	if err := b.mgr.Add(ctrl); err != nil {
		return nil, fmt.Errorf("controller %q: adding to manager: %w", name, err)
	}
	return ctrl, nil
}
