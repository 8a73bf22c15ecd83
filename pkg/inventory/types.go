package inventory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Event reasons every inventory provider records on its source objects.
const (
	ReasonEngaged       = "ClusterEngaged"
	ReasonEngageFailed  = "ClusterEngageFailed"
	ReasonDuplicateName = "DuplicateClusterName"
	ReasonInvalidName   = "InvalidClusterName"
	// ReasonCredentialsExpiring: the cluster's bearer token expires soon
	// and the source object has not given another (see
	// clusters.ExpiringCredentialsError).
	ReasonCredentialsExpiring = "ClusterCredentialsExpiring"
	// ReasonCredentialsRefused: the member rejects the new credentials of
	// the source object, and its cluster keeps running with the previous
	// ones (see clusters.RefusedCredentialsError).
	ReasonCredentialsRefused = "ClusterCredentialsRefused"
	// ReasonWatchSilent: every watch of the engaged cluster has received
	// nothing (no event, no bookmark) for longer than the health options'
	// WatchSilence while its API server answers; the cluster is
	// disconnected and engaged again after FailureThreshold such probes
	// (see fleet.WatchSilentError).
	ReasonWatchSilent = "ClusterWatchSilent"
)

// PausedAnnotation, set to "true" on an inventory object (a kubeconfig
// Secret, a Cluster API Cluster, a ClusterProfile, any object a provider
// built on the kit reads), pauses its cluster: it stays engaged and its
// caches keep running, and every multi-cluster controller holds its
// requests until the annotation is removed (or set to "false"), then
// reconciles each once (see mcmanager.ClusterPauser). Adding or removing it
// never rebuilds the cluster. Every replica reads the same object, so under
// sharding the pause follows the cluster to its next owner. Another value is
// reported once per change of the object and counts as not paused.
const PausedAnnotation = "multicluster-runtime.io/paused"

// ReasonInvalidPausedAnnotation is the Event reason of a PausedAnnotation
// that is neither "true" nor "false".
const ReasonInvalidPausedAnnotation = "InvalidPausedAnnotation"

// Desired is what one inventory object asks for.
type Desired struct {
	// Name of the cluster. The kit refuses names clusters.ValidateClusterName
	// refuses.
	Name multicluster.ClusterName
	// Config reaches the cluster. Hash identifies what it was made from (see
	// Hash): the cluster is rebuilt when, and only when, the hash changes.
	Config *rest.Config
	Hash   string
	// Sensitive is what Config was made from (a kubeconfig): the words of it
	// that appear in an error reported about the cluster are cut out.
	Sensitive []byte
	// Withdrawn, when not empty, says why the object asks for no cluster
	// now: the one it asked for before, if any, is disengaged, even when
	// Desire also returns an error to report (credentials gone, say).
	Withdrawn string
	// Paused pauses the cluster (see PausedAnnotation) without rebuilding
	// it. For objects the kit sets it from PausedAnnotation itself, after
	// Desire: a provider sets it only to pause for a reason of its own.
	// Providers with a List set it from their listing.
	Paused bool
	// LogValues are key/value pairs added to the line the kit logs when it
	// engages or re-creates the cluster, such as how the cluster is reached.
	// Never credentials.
	LogValues []any
}

// Hash returns a hash of data for Desired.Hash.
func Hash(data ...[]byte) string {
	h := sha256.New()
	for _, d := range data {
		h.Write(d)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Problem is a failure reported on the source object as a Warning Event
// with Reason. Return it, wrapped or not, from Options.Desire.
type Problem struct {
	Reason string
	Err    error
	// Terminal problems only a change of the object can fix: each is
	// reported once per change of the object (its generation, or its
	// resourceVersion for types without one), and not retried. Others are
	// reported and retried with backoff.
	Terminal bool
}

func (p *Problem) Error() string { return p.Err.Error() }
func (p *Problem) Unwrap() error { return p.Err }

// Refused is a terminal Problem.
func Refused(reason string, err error) error {
	return &Problem{Reason: reason, Err: err, Terminal: true}
}

// Failed is a Problem retried with backoff.
func Failed(reason string, err error) error { return &Problem{Reason: reason, Err: err} }

// Options describe an inventory to the kit.
type Options[T client.Object] struct {
	// Name names the host controller, its logger and its Events' reporting
	// controller; two kits in one manager need two names. Required.
	Name string
	// Object is an empty object of the inventory type. Required.
	Object T
	// Desire says what an object asks for. The kit calls it for every object
	// present and not being deleted; r reads the kit's cache (Object and
	// Related). Return Problems for what the object's owner should hear of.
	// Required.
	Desire func(ctx context.Context, r client.Reader, obj T) (Desired, error)
	// Scheme knows Object and Related. Default: the host manager's.
	Scheme *runtime.Scheme
	// Namespaces limits what is read. Default: every namespace.
	Namespaces []string
	// Selectors select the objects read; an object is read while any of them
	// selects it (one cache each: label selectors cannot say "or"). Default:
	// every object.
	Selectors []labels.Selector
	// Related are other types Desire reads.
	Related []Related
	// InvalidNameReason is the Event reason of an invalid name. Default
	// ReasonInvalidName.
	InvalidNameReason string
	// RateLimiter of the host controller. Default: controller-runtime's.
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]
	// ClusterOptions are applied to every cluster built.
	ClusterOptions []cluster.Option
	// HealthCheck, if set, checks the health of each of the provider's
	// clusters on every probe, after /readyz and the manager's own check
	// (mcmanager.HealthOptions.Check): "this CRD is served", say. An error
	// counts as a failed probe. See mcmanager.ClusterHealthChecker.
	HealthCheck func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error

	// List, for an inventory that cannot be watched (the local kind
	// clusters, say), replaces Object and Desire: the kit calls it every
	// Interval, publishes what it lists and withdraws what it no longer
	// lists. A Desired without Config keeps its cluster as it is (its source
	// could not be read this time). A failed listing keeps every cluster.
	// Entries that share a name are arbitrated as objects are: the one whose
	// cluster is engaged under the name (by Hash) keeps it, or else the one
	// listed first takes it; the others are skipped, logged once per change,
	// until it is no longer listed.
	List     func(ctx context.Context) ([]Desired, error)
	Interval time.Duration // default 5s
	// Watch, for a List whose inventory tells when it changes (files,
	// through fsnotify), replaces the Interval: the kit runs it for its run
	// and lists when it calls changed (it calls it once it watches, for the
	// first listing) and when a cluster rejects its credentials. An error
	// it returns before ctx ends stops the kit with it. Default: changed at
	// once and every Interval. List and Watch are given ctx with the kit's
	// logger (logf.FromContext).
	Watch func(ctx context.Context, changed func()) error
}

// Related is a type Desire reads besides the inventory objects, such as a
// Secret holding an object's credentials.
type Related struct {
	Object   client.Object
	Selector labels.Selector // default: every object
	// Owners maps a related object to the inventory objects it concerns:
	// they are considered again when it changes.
	Owners func(client.Object) []client.ObjectKey
}
