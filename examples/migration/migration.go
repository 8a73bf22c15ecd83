package migration

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mccontext "github.com/mcruntime/multicluster-runtime/pkg/context"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// LogRequest shows that multicluster.ClusterName is a string: it is compared,
// logged and collected as one, without Empty(), String() or a conversion. It
// returns the names it collected: none for the host.
func LogRequest(log logr.Logger, req mcreconcile.Request) []string {
	// snippet:migration-cluster-name
	if req.ClusterName == "" { // upstream: req.ClusterName.Empty()
		log.Info("reconciling on the host", "object", req.NamespacedName.String())
		return nil
	}
	log.Info("reconciling", "cluster", req.ClusterName) // upstream: req.ClusterName.String()
	names := []string{req.ClusterName}                  // string(req.ClusterName) still compiles
	// end-snippet
	return names
}

// snippet:migration-request-type
// MyReq is a request type of the application's own: ClusterAware asks for
// Cluster and WithCluster only; other methods (String, for logs) are allowed.
type MyReq struct {
	ClusterName multicluster.ClusterName
	Key         string
}

func (r MyReq) Cluster() multicluster.ClusterName { return r.ClusterName }

func (r MyReq) WithCluster(name multicluster.ClusterName) MyReq {
	r.ClusterName = name
	return r
}

// end-snippet

// SetupTyped registers a controller of MyReq. For and Owns need
// mcreconcile.Request, so the ConfigMaps are watched with Watches and a
// handler of MyReq, which TypedInjectCluster tags with the event's cluster.
func SetupTyped(mgr mcmanager.Manager, r reconcile.TypedReconciler[MyReq]) error {
	// snippet:migration-typed-watches
	return mcbuilder.TypedControllerManagedBy[MyReq](mgr).
		Named("configmaps").
		Watches(&corev1.ConfigMap{}, mchandler.TypedInjectCluster[client.Object, MyReq](
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []MyReq {
				return []MyReq{{Key: client.ObjectKeyFromObject(o).String()}}
			}))).
		Complete(r)
	// end-snippet
}

// snippet:migration-webhook
// validator refuses ConfigMaps without data; it knows which cluster asks from
// the path the member's webhook configuration calls.
type validator struct{}

func (validator) ValidateCreate(ctx context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	cluster, _ := mccontext.ClusterFrom(ctx) // "" for the host (plain path)
	if len(cm.Data) == 0 {
		return nil, errors.New("cluster " + cluster + ": a ConfigMap needs data")
	}
	return nil, nil
}

func (v validator) ValidateUpdate(ctx context.Context, _, cm *corev1.ConfigMap) (admission.Warnings, error) {
	return v.ValidateCreate(ctx, cm)
}

func (validator) ValidateDelete(context.Context, *corev1.ConfigMap) (admission.Warnings, error) {
	return nil, nil
}

// SetupWebhook serves the validator for the host at /validate--v1-configmap
// and for each member at WebhookClusterPath(member, that path).
func SetupWebhook(mgr mcmanager.Manager) error {
	return mcbuilder.WebhookManagedBy(mgr, &corev1.ConfigMap{}).WithValidator(validator{}).Complete()
}

// MemberWebhookURL is what a member's ValidatingWebhookConfiguration names
// in clientConfig.url, e.g. https://webhooks.example.com:9443.
func MemberWebhookURL(base string, member multicluster.ClusterName) string {
	return base + mcbuilder.WebhookClusterPath(member, "/validate--v1-configmap")
}

// end-snippet

// SetupFiltered watches the fleet but neither the host nor "staging".
func SetupFiltered(mgr mcmanager.Manager, r mcreconcile.Reconciler) error {
	// snippet:migration-cluster-filter
	// Filters are offered the host as "": accept it explicitly if it is wanted.
	src := mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]()).
		WithClusterFilter(func(name multicluster.ClusterName, _ cluster.Cluster) bool {
			return name != "" && name != "staging"
		})
	return mcbuilder.ControllerManagedBy(mgr).
		Named("configmaps-but-staging").
		WatchesRawSource(src).
		Complete(r)
	// end-snippet
}

// SetupMemberToHost enqueues, for every ConfigMap of a member, a request for
// the host's ConfigMap of the same key.
func SetupMemberToHost(mgr mcmanager.Manager, r mcreconcile.Reconciler) error {
	// snippet:migration-member-to-host
	// Requests name their cluster as they are: "" is the host, not the
	// cluster of the event (as EnqueueRequestsFromMapFuncWithClusterPreservation does).
	toHost := mchandler.EnqueueClusterRequestsFromMapFunc(
		func(_ context.Context, member multicluster.ClusterName, o client.Object) []mcreconcile.Request {
			req := mcreconcile.Request{ClusterName: mcmanager.LocalCluster}
			req.NamespacedName = client.ObjectKeyFromObject(o)
			return []mcreconcile.Request{req}
		})
	return mcbuilder.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)).
		Watches(&corev1.ConfigMap{}, toHost).
		Complete(r)
	// end-snippet
}
