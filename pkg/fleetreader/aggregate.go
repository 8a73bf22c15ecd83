package fleetreader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Labels, annotations and keys of the partial results an Aggregate keeps on
// the host.
const (
	// LabelAggregate holds AggregateOptions.Name on every partial result.
	LabelAggregate = "fleetreader.multicluster-runtime.io/aggregate"
	// AnnotationReplica holds the identity of the replica that wrote a
	// partial result.
	AnnotationReplica = "fleetreader.multicluster-runtime.io/replica"
	// PartialsKey is the data key of a partial result: a JSON object of
	// cluster name to that cluster's partial value.
	PartialsKey = "partials"
)

// Assignment is who runs which cluster as this replica sees the group of
// replicas: under sharding, the coordinator's assignment
// (mcmanager.Manager's Assignment); without it, one replica, "", runs all.
type Assignment interface {
	// Identity is this replica's identity.
	Identity() string
	// Owner is the replica the cluster is assigned to.
	Owner(name string) string
	// Peers are the live replicas, this one included.
	Peers() []string
	// Changed is closed when the assignment may have changed.
	Changed() <-chan struct{}
}

// AggregateOptions configure an Aggregate.
type AggregateOptions[T any] struct {
	// Name of the aggregate, unique among the aggregates that keep their
	// partial results in Namespace: a DNS label of at most 40 characters.
	// Required.
	Name string
	// Namespace on the host that holds the partial results (ConfigMaps
	// "<Name>-partial-<hash of the replica>"). Required.
	Namespace string
	// Partial computes one cluster's contribution to the summary, typically
	// from the Reader with InClusters(cluster). It is called for every
	// cluster this replica reads, on every replica. An error wrapping
	// multicluster.ErrClusterNotFound leaves the cluster out (it left); any
	// other error retries the publication with backoff. Required.
	Partial func(ctx context.Context, reader *Reader, cluster multicluster.ClusterName) (T, error)
	// Combine writes the summary from every cluster's contribution: it
	// runs on one replica, the host's owner, whenever a contribution or the
	// assignment changes. An error is retried with backoff. Required.
	Combine func(ctx context.Context, partials map[multicluster.ClusterName]T) error
	// Logger defaults to the Reader's.
	Logger *logr.Logger
}

// Aggregate computes a fleet-wide summary that is whole under sharding: the
// same as the one a single replica reading every cluster would compute,
// provided the summary is a function of per-cluster contributions (counts,
// sums, lists, maxima... each cluster's part computed from that cluster
// alone).
//
// Each replica publishes the contributions of the clusters it reads (its
// shard) as one partial result on the host: Aggregate is the reconciler of a
// controller that watches the fleet with mcsource.FanIn(obj, a.Request()), so
// that a change anywhere, and each cluster's arrival and departure, publish
// again. The host's owner (the one replica that runs the host's work, see
// mcmanager.WithSharding) watches the partial results and combines them: for
// each cluster it takes the contribution of the replica the cluster is
// assigned to, so that a replica that died, or one that has not yet
// republished after a hand-off, cannot contribute a cluster twice or stale.
// Partial results of replicas gone for longer than a minute are deleted.
//
// The combined summary is eventually equal to the single replica's: after a
// change it is complete once the owner of the changed cluster has published
// and the host's owner has combined (two writes and one watch event). During
// a hand-off a cluster may be missing from it until its new owner has
// engaged and published it. Each partial result is one ConfigMap, so a
// replica's contributions together must stay under 1 MiB of JSON.
//
// The replicas need get, list, watch, create, update and delete on
// ConfigMaps in AggregateOptions.Namespace on the host.
type Aggregate[T any] struct {
	opts    AggregateOptions[T]
	reader  *Reader
	assign  Assignment
	client  corev1client.ConfigMapInterface
	log     logr.Logger
	request reconcile.Request

	mu        sync.Mutex
	published []byte // last partial result written, to skip identical writes
}

// NewAggregate returns an Aggregate over reader's clusters and adds its
// combining side to mgr, which runs it on the host's owner alone (it needs
// leader election in controller-runtime's sense). Use the Aggregate as the
// reconciler of a controller fed by mcsource.FanIn(obj, a.Request()).
func NewAggregate[T any](mgr Manager, reader *Reader, opts AggregateOptions[T]) (*Aggregate[T], error) {
	if reader == nil {
		return nil, errors.New("fleetreader: aggregate: nil Reader")
	}
	var errs []error
	if opts.Partial == nil || opts.Combine == nil {
		errs = append(errs, errors.New("options Partial and Combine are required"))
	}
	for _, msg := range validation.IsDNS1123Label(opts.Name) {
		errs = append(errs, fmt.Errorf("option Name %q: %s", opts.Name, msg))
	}
	if len(opts.Name) > 40 {
		errs = append(errs, fmt.Errorf("option Name %q is longer than 40 characters", opts.Name))
	}
	for _, msg := range validation.IsDNS1123Label(opts.Namespace) {
		errs = append(errs, fmt.Errorf("option Namespace %q: %s", opts.Namespace, msg))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("fleetreader: aggregate: %w", err)
	}
	host := mgr.GetLocalManager()
	cs, err := corev1client.NewForConfig(host.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("fleetreader: aggregate %q: building the host client: %w", opts.Name, err)
	}
	var assign Assignment = singleReplica{}
	if a, ok := mgr.(interface{ Assignment() Assignment }); ok && a.Assignment() != nil {
		assign = a.Assignment()
	}
	log := reader.log.WithName("aggregate").WithValues("aggregate", opts.Name)
	if opts.Logger != nil {
		log = *opts.Logger
	}
	a := &Aggregate[T]{
		opts:    opts,
		reader:  reader,
		assign:  assign,
		client:  cs.ConfigMaps(opts.Namespace),
		log:     log,
		request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: opts.Namespace, Name: opts.Name}},
	}
	if err := mgr.Add(&combiner[T]{a: a}); err != nil {
		return nil, fmt.Errorf("fleetreader: aggregate %q: adding the combiner: %w", opts.Name, err)
	}
	return a, nil
}

// Request is the hub request to give mcsource.FanIn: its reconciles publish
// this replica's partial result.
func (a *Aggregate[T]) Request() reconcile.Request { return a.request }

// partialName names a replica's partial result.
func (a *Aggregate[T]) partialName(replica string) string {
	sum := sha256.Sum256([]byte(replica))
	return a.opts.Name + "-partial-" + hex.EncodeToString(sum[:10])
}

// Reconcile publishes this replica's partial result: the contribution of
// every cluster it reads now. It ignores the request.
func (a *Aggregate[T]) Reconcile(ctx context.Context, _ mcreconcile.Request) (reconcile.Result, error) {
	partials := map[multicluster.ClusterName]T{}
	for _, cluster := range a.reader.Clusters() {
		v, err := a.opts.Partial(ctx, a.reader, cluster)
		if errors.Is(err, multicluster.ErrClusterNotFound) {
			continue // it left meanwhile: its departure publishes again
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("cluster %q: aggregate %q: computing its contribution: %w", cluster, a.opts.Name, err)
		}
		partials[cluster] = v
	}
	data, err := json.Marshal(partials) // map keys are sorted: equal contributions, equal bytes
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("aggregate %q: encoding this replica's contributions: %w", a.opts.Name, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if bytes.Equal(data, a.published) {
		return reconcile.Result{}, nil
	}
	if err := a.publish(ctx, data); err != nil {
		return reconcile.Result{}, err
	}
	a.published = data
	return reconcile.Result{}, nil
}

// publish writes data as this replica's partial result.
func (a *Aggregate[T]) publish(ctx context.Context, data []byte) error {
	identity := a.assign.Identity()
	name := a.partialName(identity)
	cm, err := a.client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   a.opts.Namespace,
			Labels:      map[string]string{LabelAggregate: a.opts.Name},
			Annotations: map[string]string{AnnotationReplica: identity},
		}, Data: map[string]string{PartialsKey: string(data)}}
		_, err = a.client.Create(ctx, cm, metav1.CreateOptions{})
	case err == nil:
		if cm.Data[PartialsKey] == string(data) && cm.Annotations[AnnotationReplica] == identity {
			return nil
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[AnnotationReplica] = identity
		cm.Data = map[string]string{PartialsKey: string(data)}
		_, err = a.client.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("aggregate %q: publishing this replica's partial result %s/%s on the host: %w", a.opts.Name, a.opts.Namespace, name, err)
	}
	return nil
}

// combiner runs on the host's owner: it watches the partial results and
// combines them. It needs leader election (it implements no
// LeaderElectionRunnable), so the Multi-Cluster Manager runs it only where
// the host's work runs; each tenure starts a fresh watch.
type combiner[T any] struct{ a *Aggregate[T] }

// gcAfter is how long the partial result of a replica that is not live is
// kept: a replica that restarts within it keeps its object.
const gcAfter = time.Minute

func (c *combiner[T]) Start(ctx context.Context) error {
	a := c.a
	selector := labels.SelectorFromSet(labels.Set{LabelAggregate: a.opts.Name}).String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return a.client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return a.client.Watch(ctx, o)
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		a.log.Error(err, "Watching the partial results failed; retrying", "namespace", a.opts.Namespace)
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { inf.RunWithContext(ctx) })
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	a.log.Info("Combining the partial results on this replica: it runs the host's work")
	poke()
	notLive := map[string]time.Time{} // partial results of replicas not live, since
	tick := time.NewTicker(gcAfter / 2)
	defer tick.Stop()
	var retry <-chan time.Time
	backoff := time.Duration(0)
	for {
		changed := a.assign.Changed()
		select {
		case <-ctx.Done():
			return nil
		case <-trigger:
		case <-changed:
		case <-tick.C:
			c.collect(ctx, inf.GetStore(), notLive)
			continue
		case <-retry:
		}
		retry = nil
		if err := c.combine(ctx, inf.GetStore()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, time.Second), time.Minute)
			a.log.Error(err, "Combining the partial results failed; retrying", "retryIn", backoff.String())
			retry = time.After(backoff)
			continue
		}
		backoff = 0
	}
}

// combine takes, for each cluster, the contribution of the replica it is
// assigned to, and calls Combine.
func (c *combiner[T]) combine(ctx context.Context, store toolscache.Store) error {
	a := c.a
	all := map[multicluster.ClusterName]T{}
	for _, obj := range store.List() {
		cm := obj.(*corev1.ConfigMap)
		replica, ok := cm.Annotations[AnnotationReplica]
		if !ok {
			a.log.Info("Ignoring a partial result that names no replica", "configMap", cm.Namespace+"/"+cm.Name)
			continue
		}
		var partials map[multicluster.ClusterName]T
		if err := json.Unmarshal([]byte(cm.Data[PartialsKey]), &partials); err != nil {
			a.log.Error(err, "Ignoring a partial result that cannot be decoded", "configMap", cm.Namespace+"/"+cm.Name, "replica", replica)
			continue
		}
		for cluster, v := range partials {
			if a.assign.Owner(cluster) == replica {
				all[cluster] = v
			}
		}
	}
	if err := a.opts.Combine(ctx, all); err != nil {
		return fmt.Errorf("aggregate %q: combining %d clusters: %w", a.opts.Name, len(all), err)
	}
	return nil
}

// collect deletes the partial results of replicas that have not been live
// for gcAfter, as this replica observed them.
func (c *combiner[T]) collect(ctx context.Context, store toolscache.Store, notLive map[string]time.Time) {
	a := c.a
	peers := a.assign.Peers()
	now := time.Now()
	seen := map[string]bool{}
	for _, obj := range store.List() {
		cm := obj.(*corev1.ConfigMap)
		replica := cm.Annotations[AnnotationReplica]
		if slices.Contains(peers, replica) {
			continue
		}
		seen[cm.Name] = true
		since, ok := notLive[cm.Name]
		if !ok {
			notLive[cm.Name] = now
			continue
		}
		if now.Sub(since) < gcAfter {
			continue
		}
		rv := cm.ResourceVersion
		err := a.client.Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			a.log.Error(err, "Deleting the partial result of a replica that is gone failed; retrying later", "configMap", cm.Namespace+"/"+cm.Name, "replica", replica)
			continue
		}
		a.log.Info("Deleted the partial result of a replica that is gone", "configMap", cm.Namespace+"/"+cm.Name, "replica", replica, "goneFor", now.Sub(since).Round(time.Second).String())
	}
	for name := range notLive {
		if !seen[name] {
			delete(notLive, name)
		}
	}
}

// singleReplica is the assignment without sharding: this replica runs all.
type singleReplica struct{}

func (singleReplica) Identity() string         { return "" }
func (singleReplica) Owner(string) string      { return "" }
func (singleReplica) Peers() []string          { return []string{""} }
func (singleReplica) Changed() <-chan struct{} { return nil }
