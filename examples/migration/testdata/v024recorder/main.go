// Command v024recorder is a test fake as a program written for
// controller-runtime v0.24 has it: GetEventRecorder returns an
// events.EventRecorder. It does not build against v0.25, on purpose:
// TestV024ErrorsAreOnThePage builds it and looks for the compiler's error on
// the migration page.
package main

import (
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

type fakeCluster struct {
	cluster.Cluster
	recorder events.EventRecorder
}

func (c *fakeCluster) GetEventRecorder(name string) events.EventRecorder { return c.recorder }

func main() {
	var _ cluster.Cluster = &fakeCluster{}
}
