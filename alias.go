// Package multiclusterruntime mirrors controller-runtime's root aliases for
// multi-cluster controllers, so that a program can start from one import:
//
//	mgr, err := mcr.NewManager(mcr.GetConfigOrDie(), provider, mcr.Options{})
//	err = mcr.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(r)
//	err = mgr.Start(mcr.SetupSignalHandler())
package multiclusterruntime

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	"sigs.k8s.io/controller-runtime/pkg/scheme"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Builder builds multi-cluster controllers.
type Builder = mcbuilder.Builder

// Request is a reconcile request tagged with its cluster.
type Request = mcreconcile.Request

// Result is the result of a reconcile.
type Result = mcreconcile.Result

// Reconciler reconciles multi-cluster requests.
type Reconciler = mcreconcile.Reconciler

// Manager is the Multi-Cluster Manager.
type Manager = mcmanager.Manager

// Options configure the host cluster's manager.
type Options = mcmanager.Options

// Provider discovers the clusters of the fleet.
type Provider = multicluster.Provider

// ClusterName names a cluster of the fleet.
type ClusterName = multicluster.ClusterName

// GroupVersion contains the "group" and the "version", which uniquely
// identifies the API.
type GroupVersion = schema.GroupVersion

// GroupResource specifies a Group and a Resource, but does not force a
// version.
type GroupResource = schema.GroupResource

// TypeMeta describes an individual object in an API response or request.
type TypeMeta = metav1.TypeMeta

// ObjectMeta is metadata that all persisted resources must have.
type ObjectMeta = metav1.ObjectMeta

// SchemeBuilder builds a Scheme for API types, as controller-runtime's root
// alias of the same name does; kept for programs of the upstream design.
//
// Deprecated: as in controller-runtime, API packages should not depend on a
// controller library: use k8s.io/apimachinery/pkg/runtime.NewSchemeBuilder.
//
//lint:ignore SA1019 the alias of a deprecated name, kept deprecated
type SchemeBuilder = scheme.Builder

var (
	// ErrClusterNotFound is wrapped by errors about clusters that are not engaged.
	ErrClusterNotFound = multicluster.ErrClusterNotFound

	// NewManager returns a Multi-Cluster Manager; see mcmanager.New.
	NewManager = mcmanager.New

	// NewControllerManagedBy starts building a multi-cluster controller.
	NewControllerManagedBy = mcbuilder.ControllerManagedBy

	// GetConfig returns the host cluster's config from flags, $KUBECONFIG or in-cluster.
	GetConfig = config.GetConfig

	// GetConfigOrDie is GetConfig that exits on error.
	GetConfigOrDie = config.GetConfigOrDie

	// RegisterFlags registers the --kubeconfig flag.
	RegisterFlags = config.RegisterFlags

	// SetupSignalHandler returns a context cancelled on SIGTERM or SIGINT.
	SetupSignalHandler = signals.SetupSignalHandler

	// CreateOrUpdate creates or updates an object through a cluster's client.
	CreateOrUpdate = controllerutil.CreateOrUpdate

	// CreateOrPatch creates or patches an object through a cluster's client.
	CreateOrPatch = controllerutil.CreateOrPatch

	// SetControllerReference sets an owner reference within one cluster.
	SetControllerReference = controllerutil.SetControllerReference

	// Log is the base logger.
	Log = log.Log

	// SetLogger sets the base logger.
	SetLogger = log.SetLogger

	// LoggerFrom returns the logger in a context.
	LoggerFrom = log.FromContext

	// LoggerInto puts a logger into a context.
	LoggerInto = log.IntoContext
)

// NewWebhookManagedBy starts building the webhooks for obj's type, served by
// the host manager's webhook server; see mcbuilder.WebhookManagedBy.
func NewWebhookManagedBy[T runtime.Object](mgr mcmanager.Manager, obj T) *mcbuilder.WebhookBuilder[T] {
	return mcbuilder.WebhookManagedBy(mgr, obj)
}

// TypedBuilder builds multi-cluster controllers with their own request type.
type TypedBuilder[request mcreconcile.ClusterAware[request]] = mcbuilder.TypedBuilder[request]

// NewTypedControllerManagedBy starts building a multi-cluster controller with
// its own request type; see mcbuilder.TypedControllerManagedBy.
func NewTypedControllerManagedBy[request mcreconcile.ClusterAware[request]](mgr mcmanager.Manager) *mcbuilder.TypedBuilder[request] {
	return mcbuilder.TypedControllerManagedBy[request](mgr)
}
