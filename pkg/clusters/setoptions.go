package clusters

import "sigs.k8s.io/controller-runtime/pkg/client"

// SetOption adds to what Members.Set publishes.
type SetOption func(*setOptions)

type setOptions struct {
	source client.Object
	paused bool
}

// SetSource gives the inventory object the cluster was read from: the
// settings hook (see SettingsFunc) sees it when the cluster is built.
func SetSource(obj client.Object) SetOption { return func(o *setOptions) { o.source = obj } }

// SetPaused pauses the cluster (see fleet.Member.Paused) or resumes it. A
// change of the pause alone never rebuilds the cluster.
func SetPaused(paused bool) SetOption { return func(o *setOptions) { o.paused = paused } }
