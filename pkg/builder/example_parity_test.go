package builder_test

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mccontext "github.com/mcruntime/multicluster-runtime/pkg/context"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// A request type of the controller's own: it carries its cluster, so it
// satisfies mcreconcile.ClusterAware.
type nameRequest struct {
	Name        string
	ClusterName multicluster.ClusterName
}

func (r nameRequest) Cluster() multicluster.ClusterName { return r.ClusterName }

func (r nameRequest) WithCluster(name multicluster.ClusterName) nameRequest {
	r.ClusterName = name
	return r
}

// A controller with its own request type. Watches takes a per-cluster handler
// of that type; TypedInjectCluster sets each request's cluster.
func ExampleTypedControllerManagedBy() {
	var mgr mcmanager.Manager // from mcmanager.New
	toName := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []nameRequest {
		return []nameRequest{{Name: obj.GetName()}}
	})
	err := mcbuilder.TypedControllerManagedBy[nameRequest](mgr).
		Named("by-name").
		Watches(&corev1.ConfigMap{}, mchandler.TypedInjectCluster[client.Object, nameRequest](toName)).
		Complete(reconcile.TypedFunc[nameRequest](func(ctx context.Context, req nameRequest) (reconcile.Result, error) {
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return reconcile.Result{}, err
			}
			_ = cl // read and write req.Name in cl
			return reconcile.Result{}, nil
		}))
	if err != nil {
		panic(err)
	}
}

type configMapValidator struct{}

func (configMapValidator) ValidateCreate(ctx context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	cluster, _ := mccontext.ClusterFrom(ctx) // "" on the plain path: the host
	if cm.Data["owner"] == "" {
		return nil, errors.New("cluster " + cluster + ": ConfigMaps need an owner")
	}
	return nil, nil
}

func (configMapValidator) ValidateUpdate(ctx context.Context, _, cm *corev1.ConfigMap) (admission.Warnings, error) {
	return configMapValidator{}.ValidateCreate(ctx, cm)
}

func (configMapValidator) ValidateDelete(context.Context, *corev1.ConfigMap) (admission.Warnings, error) {
	return nil, nil
}

// A validating webhook served by the host manager's webhook server. The host's
// API server calls /validate--v1-configmap; a member's webhook configuration
// names WebhookClusterPath(member, "/validate--v1-configmap") on the same
// server (reachable from the member's network, with the server's CA), and the
// validator finds the member's name in its context.
func ExampleWebhookManagedBy() {
	var mgr mcmanager.Manager // from mcmanager.New, with Options.WebhookServer
	err := mcbuilder.WebhookManagedBy(mgr, &corev1.ConfigMap{}).
		WithValidator(configMapValidator{}).
		Complete()
	if err != nil {
		panic(err)
	}
	_ = mcbuilder.WebhookClusterPath("east", "/validate--v1-configmap") // "/clusters/east/validate--v1-configmap"
}
