// Package engagements hands a multi-cluster controller's record of its
// engagements to the sources it starts, so that a source routing events by
// cluster name (mcsource.Channel) asks the controller which clusters it is
// engaged with instead of keeping a record of its own.
package engagements

import (
	"context"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Record is a controller's record of its engagements.
type Record interface {
	// StartedIn returns the sources the controller started in the cluster
	// engaged under name (what their multi-cluster sources' ForCluster
	// returned), none if the controller is not engaged with it.
	StartedIn(name multicluster.ClusterName) []any
}

type key struct{}

// With returns ctx carrying rec, for the sources a controller starts.
func With(ctx context.Context, rec Record) context.Context {
	return context.WithValue(ctx, key{}, rec)
}

// From returns the record of the controller that started a source with ctx.
func From(ctx context.Context) (Record, bool) {
	rec, ok := ctx.Value(key{}).(Record)
	return rec, ok
}
