package namespace

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Issue 40, defect 1: a namespace's virtual cluster that leaves this
// replica — handed to another, or its fence lost to a renewal lapse — is
// engaged again when it comes back, and answers reads. The provider
// published each view once, as a pre-built cluster, which the engine
// stopped when it left and then refused to start again ("a pre-built
// cluster cannot be started again"): it stayed disconnected for ever. A
// view is cheap: the provider publishes a Build, and the engine makes a new
// view for every start.
func TestVirtualClusterEngagedAgainAfterHandOffAndFenceLoss(t *testing.T) {
	fences := testbed.NewFences()
	e := mcfleet.New(mcfleet.Options{Admission: fences, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Logger: testr.New(t)})
	e.Subscribe(fleettest.NewTracker())
	p := New(testbed.NewCluster(t, fleet.Config(0)))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{}, 2)
	go func() { _ = e.Start(ctx); stopped <- struct{}{} }()
	go func() { _ = p.Start(ctx, e); stopped <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-stopped; <-stopped })

	ns := testbed.Name("handed-off")
	c := directClient(t)
	testbed.CreateNamespace(t, c, ns)
	testbed.CreateConfigMap(t, c, ns, "cm", nil)
	testbed.LeaveAndComeBack(t, e, fences, ns, func(name multicluster.ClusterName) error {
		cl, err := p.Get(ctx, name)
		if err != nil {
			return err
		}
		// Its client reads through the shared cache, in the namespace.
		return cl.GetClient().Get(ctx, client.ObjectKey{Namespace: VirtualNamespace, Name: "cm"}, &corev1.ConfigMap{})
	})
}
