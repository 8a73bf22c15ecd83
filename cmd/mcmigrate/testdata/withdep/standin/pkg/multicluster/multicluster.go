// Package multicluster stands in for upstream's: ClusterName is a defined
// type there.
package multicluster

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// ClusterName names a cluster.
type ClusterName string

// ErrClusterNotFound is returned for an unknown cluster.
var ErrClusterNotFound = errors.New("cluster not found")

// Provider is upstream's provider contract.
type Provider interface {
	Get(ctx context.Context, clusterName ClusterName) (cluster.Cluster, error)
	IndexField(ctx context.Context, obj client.Object, field string, extractValue client.IndexerFunc) error
}
