package builder

import (
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ForOption configures a For watch.
type ForOption interface{ ApplyToFor(*ForInput) }

// OwnsOption configures an Owns watch.
type OwnsOption interface{ ApplyToOwns(*OwnsInput) }

// WatchesOption configures a Watches watch.
type WatchesOption interface{ ApplyToWatches(*WatchesInput) }

// watchInput is what every kind of watch shares.
type watchInput struct {
	predicates   []predicate.Predicate
	metadataOnly bool
	engage       engageInput
}

// engageInput holds a watch's engage options; nil means "the default".
type engageInput struct {
	local    *bool
	provider *bool
	filter   func(multicluster.ClusterName, cluster.Cluster) bool
	from     *otherProvider // WithClustersFromProvider; nil: the manager's provider
}

// ForInput is the configuration of the For watch.
type ForInput struct{ watchInput }

// OwnsInput is the configuration of an Owns watch.
type OwnsInput struct {
	watchInput
	matchEveryOwner bool
}

// WatchesInput is the configuration of a Watches watch.
type WatchesInput struct{ watchInput }

// Predicates filter a watch's events.
type Predicates struct{ predicates []predicate.Predicate }

// WithPredicates filters a watch's events; they apply in every cluster.
func WithPredicates(predicates ...predicate.Predicate) Predicates {
	return Predicates{predicates: predicates}
}

// ApplyToFor adds the predicates to a For watch.
func (p Predicates) ApplyToFor(in *ForInput) { in.predicates = append(in.predicates, p.predicates...) }

// ApplyToOwns adds the predicates to an Owns watch.
func (p Predicates) ApplyToOwns(in *OwnsInput) {
	in.predicates = append(in.predicates, p.predicates...)
}

// ApplyToWatches adds the predicates to a Watches watch.
func (p Predicates) ApplyToWatches(in *WatchesInput) {
	in.predicates = append(in.predicates, p.predicates...)
}

type onlyMetadata struct{}

// OnlyMetadata watches only the objects' metadata (PartialObjectMetadata),
// which keeps caches small.
var OnlyMetadata = onlyMetadata{}

func (onlyMetadata) ApplyToFor(in *ForInput)         { in.metadataOnly = true }
func (onlyMetadata) ApplyToOwns(in *OwnsInput)       { in.metadataOnly = true }
func (onlyMetadata) ApplyToWatches(in *WatchesInput) { in.metadataOnly = true }

type matchEveryOwner struct{}

// MatchEveryOwner makes Owns enqueue every owner of the For type, not only the
// controller owner.
var MatchEveryOwner = matchEveryOwner{}

func (matchEveryOwner) ApplyToOwns(in *OwnsInput) { in.matchEveryOwner = true }

// EngageOptions choose the clusters a watch covers.
type EngageOptions struct{ apply func(*engageInput) }

// ApplyToFor sets the For watch's clusters.
func (o EngageOptions) ApplyToFor(in *ForInput) { o.apply(&in.engage) }

// ApplyToOwns sets an Owns watch's clusters.
func (o EngageOptions) ApplyToOwns(in *OwnsInput) { o.apply(&in.engage) }

// ApplyToWatches sets a Watches watch's clusters.
func (o EngageOptions) ApplyToWatches(in *WatchesInput) { o.apply(&in.engage) }

// WithEngageWithLocalCluster makes the watch cover the host cluster (requests
// with ClusterName ""). Default: true without a provider, false with one.
func WithEngageWithLocalCluster(engage bool) EngageOptions {
	return EngageOptions{apply: func(in *engageInput) { in.local = &engage }}
}

// WithEngageWithProviderClusters makes the watch cover the provider's
// clusters. Default: true with a provider.
func WithEngageWithProviderClusters(engage bool) EngageOptions {
	return EngageOptions{apply: func(in *engageInput) { in.provider = &engage }}
}

// WithClusterFilter restricts the watch to the clusters filter accepts; the
// host is offered under the name "".
func WithClusterFilter(filter func(name multicluster.ClusterName, cl cluster.Cluster) bool) EngageOptions {
	return EngageOptions{apply: func(in *engageInput) { in.filter = filter }}
}

var (
	_ ForOption     = Predicates{}
	_ OwnsOption    = Predicates{}
	_ WatchesOption = Predicates{}
	_ ForOption     = OnlyMetadata
	_ OwnsOption    = MatchEveryOwner
	_ WatchesOption = EngageOptions{}
)
