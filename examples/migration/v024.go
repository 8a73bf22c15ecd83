package migration

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// snippet:migration-v024-recorder
// annotated turns a controller-runtime v0.24 events.EventRecorder into the
// recorder.EventRecorder v0.25's GetEventRecorder returns (annotations dropped).
type annotated struct{ events.EventRecorder }

func (a annotated) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventtype, reason, action, note string, args ...any) {
	a.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// end-snippet

// testCluster is a test fake of a program written for controller-runtime
// v0.24: its recorder is the events.EventRecorder it always was, and one
// method adapts it to v0.25.
type testCluster struct {
	cluster.Cluster
	events events.EventRecorder
}

// snippet:migration-v024-get-event-recorder
func (c *testCluster) GetEventRecorder(name string) recorder.EventRecorder {
	return annotated{c.events} // v0.24: return c.events
}

// end-snippet

var _ cluster.Cluster = &testCluster{}

// NewTestCluster returns the fake around rec, for the example.
func NewTestCluster(rec events.EventRecorder) cluster.Cluster {
	return &testCluster{events: rec}
}
