package handler

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// EventHandler is a controller-runtime event handler of multi-cluster
// requests: what a TypedEventHandlerFunc returns for one cluster, and what
// ForCluster returns. The upstream design's name.
type EventHandler = handler.TypedEventHandler[client.Object, mcreconcile.Request]

// TypedForCluster is ForCluster under the upstream design's name for typed
// handlers: the requests h enqueues are tagged with name.
func TypedForCluster[object client.Object](h handler.TypedEventHandler[object, reconcile.Request], name multicluster.ClusterName) handler.TypedEventHandler[object, mcreconcile.Request] {
	return &lifted[object]{name: name, inner: h}
}
