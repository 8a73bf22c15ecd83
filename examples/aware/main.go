// Command aware is a multi-cluster-aware controller: hub-to-fleet fan-out.
// ConfigMaps labelled fleet.example.com/propagate=true in namespace
// "fleet-config" of the hub (the host cluster) are copied into the same
// namespace of every member cluster; a copy that drifts or is deleted is put
// back, and a cluster that joins the fleet receives every copy.
//
//	go run ./examples/aware -namespace fleet-system
//
// The fleet comes from kubeconfig Secrets in the given namespace of the hub
// (kubeconfig provider; register members with cmd/kubeconfig-secret).
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

const (
	// Namespace holds the sources on the hub and the copies in the members.
	Namespace = "fleet-config"
	// PropagateLabel marks the sources on the hub.
	PropagateLabel = "fleet.example.com/propagate"
	// CopyLabel marks the copies in the members.
	CopyLabel = "fleet.example.com/copy"
)

func main() {
	ns := flag.String("namespace", kubeconfig.DefaultNamespace, "hub namespace of the kubeconfig Secrets")
	flag.Parse()
	if err := run(*ns); err != nil {
		fmt.Fprintln(os.Stderr, "aware:", err)
		os.Exit(1)
	}
}

func run(secretNamespace string) error {
	ctx := ctrl.SetupSignalHandler()
	provider := kubeconfig.New(kubeconfig.Options{Namespace: secretNamespace})
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, mcmanager.Options{})
	if err != nil {
		return err
	}
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := Setup(mgr, provider.ClusterNames); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// snippet:aware-setup
// Setup registers the propagation controller. members lists the fleet's
// clusters (a provider's ClusterNames). Requests name the member cluster to
// write to; the source always comes from the hub.
func Setup(mgr mcmanager.Manager, members func() []multicluster.ClusterName) error {
	hub := mgr.GetLocalManager().GetClient()
	isCopy := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[CopyLabel] == "true" })
	return mcbuilder.ControllerManagedBy(mgr).
		Named("propagate").
		// The copies, in every member: drift and deletions come back here.
		For(&corev1.ConfigMap{}, mcbuilder.WithPredicates(isCopy)).
		// The sources, on the hub only: each fans out to one request per member.
		// Unlabelled ones too, so that losing the label removes the copies.
		Watches(&corev1.ConfigMap{},
			mchandler.EnqueueClusterRequestsFromMapFunc(func(ctx context.Context, _ multicluster.ClusterName, o client.Object) []mcreconcile.Request {
				if o.GetNamespace() != Namespace {
					return nil
				}
				var reqs []mcreconcile.Request
				for _, member := range members() {
					reqs = append(reqs, request(member, o.GetName()))
				}
				return reqs
			}),
			mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)).
		// A member that joins lists its namespaces: every source fans in to it.
		Watches(&corev1.Namespace{},
			mchandler.EnqueueClusterRequestsFromMapFunc(func(ctx context.Context, member multicluster.ClusterName, o client.Object) []mcreconcile.Request {
				if o.GetName() != "default" {
					return nil
				}
				sources := &corev1.ConfigMapList{}
				if err := hub.List(ctx, sources, client.InNamespace(Namespace), client.MatchingLabels{PropagateLabel: "true"}); err != nil {
					ctrl.LoggerFrom(ctx).Error(err, "Listing sources on the hub", "cluster", member)
					return nil
				}
				var reqs []mcreconcile.Request
				for _, s := range sources.Items {
					reqs = append(reqs, request(member, s.Name))
				}
				return reqs
			})).
		Complete(&Propagator{Manager: mgr})
}

// end-snippet

func request(cluster multicluster.ClusterName, name string) mcreconcile.Request {
	req := mcreconcile.Request{ClusterName: cluster}
	req.NamespacedName = types.NamespacedName{Namespace: Namespace, Name: name}
	return req
}

// Propagator writes one source from the hub into one member.
type Propagator struct {
	Manager mcmanager.Manager
}

// snippet:aware-reconcile
func (p *Propagator) Reconcile(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
	if req.ClusterName == mcmanager.LocalCluster {
		return mcreconcile.Result{}, nil // the hub is not a target
	}
	// Read the source from the hub...
	src := &corev1.ConfigMap{}
	err := p.Manager.GetLocalManager().GetClient().Get(ctx, req.NamespacedName, src)
	if err != nil && !apierrors.IsNotFound(err) {
		return mcreconcile.Result{}, err
	}
	propagated := err == nil && src.Labels[PropagateLabel] == "true"

	// ...and write the copy into the member the request names.
	member, err := p.Manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		return mcreconcile.Result{}, err // the member left the fleet: dropped
	}
	c := member.GetClient()
	dst := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
	if !propagated {
		// The source is gone or no longer labelled: remove our copy, only ours.
		if err := c.Get(ctx, req.NamespacedName, dst); err != nil {
			return mcreconcile.Result{}, client.IgnoreNotFound(err)
		}
		if dst.Labels[CopyLabel] != "true" {
			return mcreconcile.Result{}, nil
		}
		return mcreconcile.Result{}, client.IgnoreNotFound(c.Delete(ctx, dst))
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: req.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return mcreconcile.Result{}, err
	}
	_, err = controllerutil.CreateOrUpdate(ctx, c, dst, func() error {
		dst.Labels = map[string]string{CopyLabel: "true"}
		dst.Data = maps.Clone(src.Data)
		return nil
	})
	return mcreconcile.Result{}, err
}

// end-snippet
