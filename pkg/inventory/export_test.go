package inventory

import "github.com/mcruntime/multicluster-runtime/pkg/multicluster"

// RefreshForTest is what the engine calls when the named cluster rejects
// its credentials (clusters.Members.Refresh).
func (k *Kit[T]) RefreshForTest(name multicluster.ClusterName) { k.members.Refresh(name) }
