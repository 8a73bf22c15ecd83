package builder

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	mccontext "github.com/mcruntime/multicluster-runtime/pkg/context"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ClusterWebhookPathPrefix starts the paths under which a webhook serves the
// admission requests of a member cluster: the webhook of path /validate-x
// also serves /clusters/<cluster>/validate-x. See WebhookClusterPath.
const ClusterWebhookPathPrefix = "/clusters/"

// WebhookClusterPath is the path that a member cluster's webhook
// configuration names for the webhook served at path: the cluster's name
// (escaped, as it may hold '/') between ClusterWebhookPathPrefix and path.
// The handler then finds the name with mccontext.ClusterFrom.
func WebhookClusterPath(cluster multicluster.ClusterName, path string) string {
	return ClusterWebhookPathPrefix + url.PathEscape(cluster) + path
}

// WebhookBuilder builds defaulting, validating and conversion webhooks served
// by the host manager's webhook server. It is controller-runtime's webhook
// builder, and each admission webhook it registers at a path also serves
// WebhookClusterPath(<cluster>, path), so that member clusters' API servers
// can call it: the handler's context then carries the cluster name
// (mccontext.ClusterFrom); on the plain path it carries the host's, "".
//
// The name in the path is what the caller's webhook configuration says, not
// an authenticated identity: the webhook server's TLS settings decide who may
// call it at all.
type WebhookBuilder[T runtime.Object] struct {
	mgr       mcmanager.Manager
	obj       T
	inner     *builder.WebhookBuilder[T]
	defaults  bool
	validates bool
	mutPath   string
	valPath   string
	ctxFunc   func(context.Context, *http.Request) context.Context
}

// WebhookManagedBy starts building the webhooks for obj's type, served by
// mgr's webhook server (GetWebhookServer). Upstream-style code:
//
//	err := mcbuilder.WebhookManagedBy(mgr, &corev1.ConfigMap{}).
//		WithDefaulter(defaulter).
//		WithValidator(validator).
//		Complete()
func WebhookManagedBy[T runtime.Object](mgr mcmanager.Manager, obj T) *WebhookBuilder[T] {
	b := &WebhookBuilder[T]{mgr: mgr, obj: obj}
	if mgr != nil {
		b.inner = builder.WebhookManagedBy(mgr.GetLocalManager(), obj)
	}
	return b
}

// WithDefaulter serves a mutating webhook that defaults objects of type T.
func (b *WebhookBuilder[T]) WithDefaulter(d admission.Defaulter[T], opts ...admission.DefaulterOption) *WebhookBuilder[T] {
	b.defaults = true
	b.do(func(in *builder.WebhookBuilder[T]) { in.WithDefaulter(d, opts...) })
	return b
}

// WithCustomDefaulter is WithDefaulter for controller-runtime's untyped
// admission.CustomDefaulter, kept so that code written against it compiles.
//
// Deprecated: use WithDefaulter, as controller-runtime says.
func (b *WebhookBuilder[T]) WithCustomDefaulter(d admission.CustomDefaulter, opts ...admission.DefaulterOption) *WebhookBuilder[T] {
	b.defaults = true
	b.do(func(in *builder.WebhookBuilder[T]) { in.WithCustomDefaulter(d, opts...) })
	return b
}

// WithValidator serves a validating webhook for objects of type T.
func (b *WebhookBuilder[T]) WithValidator(v admission.Validator[T]) *WebhookBuilder[T] {
	b.validates = true
	b.do(func(in *builder.WebhookBuilder[T]) { in.WithValidator(v) })
	return b
}

// WithCustomValidator is WithValidator for controller-runtime's untyped
// admission.CustomValidator, kept so that code written against it compiles.
//
// Deprecated: use WithValidator, as controller-runtime says.
func (b *WebhookBuilder[T]) WithCustomValidator(v admission.CustomValidator) *WebhookBuilder[T] {
	b.validates = true
	b.do(func(in *builder.WebhookBuilder[T]) { in.WithCustomValidator(v) })
	return b
}

// WithConverter serves the conversion webhook (/convert) for the type. It is
// for the host's CRDs: conversion has no per-cluster path.
func (b *WebhookBuilder[T]) WithConverter(c func(*runtime.Scheme) (conversion.Converter, error)) *WebhookBuilder[T] {
	b.do(func(in *builder.WebhookBuilder[T]) { in.WithConverter(c) })
	return b
}

// WithLogConstructor sets how each admission request's logger is built.
func (b *WebhookBuilder[T]) WithLogConstructor(fn func(base logr.Logger, req *admission.Request) logr.Logger) *WebhookBuilder[T] {
	b.do(func(in *builder.WebhookBuilder[T]) { in.WithLogConstructor(fn) })
	return b
}

// WithContextFunc derives each admission request's context from the HTTP
// request; the context it is given already carries the cluster name.
func (b *WebhookBuilder[T]) WithContextFunc(fn func(context.Context, *http.Request) context.Context) *WebhookBuilder[T] {
	b.ctxFunc = fn
	return b
}

// RecoverPanic chooses whether a panicking handler is answered with an error
// (controller-runtime's default: true).
func (b *WebhookBuilder[T]) RecoverPanic(recover bool) *WebhookBuilder[T] {
	b.do(func(in *builder.WebhookBuilder[T]) { in.RecoverPanic(recover) })
	return b
}

// WithDefaulterCustomPath serves the defaulting webhook at path instead of
// /mutate-<group>-<version>-<kind>.
func (b *WebhookBuilder[T]) WithDefaulterCustomPath(path string) *WebhookBuilder[T] {
	b.mutPath = path
	b.do(func(in *builder.WebhookBuilder[T]) { in.WithDefaulterCustomPath(path) })
	return b
}

// WithValidatorCustomPath serves the validating webhook at path instead of
// /validate-<group>-<version>-<kind>.
func (b *WebhookBuilder[T]) WithValidatorCustomPath(path string) *WebhookBuilder[T] {
	b.valPath = path
	b.do(func(in *builder.WebhookBuilder[T]) { in.WithValidatorCustomPath(path) })
	return b
}

func (b *WebhookBuilder[T]) do(fn func(*builder.WebhookBuilder[T])) {
	if b.inner != nil {
		fn(b.inner)
	}
}

// Complete registers the webhooks with the host manager's webhook server:
// each admission webhook at its path and under ClusterWebhookPathPrefix.
func (b *WebhookBuilder[T]) Complete() error {
	if b.mgr == nil {
		return errors.New("must provide a non-nil Manager")
	}
	user := b.ctxFunc
	b.inner.WithContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		// The cluster wildcard is empty on the plain path: the host.
		ctx = mccontext.WithCluster(ctx, r.PathValue("cluster"))
		if user != nil {
			ctx = user(ctx, r)
		}
		return ctx
	})
	// controller-runtime's builder refuses misuse in its own words, which
	// upstream code may compare: returned as they are.
	if err := b.inner.Complete(); err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(b.obj, b.mgr.GetLocalManager().GetScheme())
	if err != nil {
		return err
	}
	kind := strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
	var paths []string
	if b.defaults {
		paths = append(paths, or(b.mutPath, "/mutate-"+kind))
	}
	if b.validates {
		paths = append(paths, or(b.valPath, "/validate-"+kind))
	}
	mux := b.mgr.GetWebhookServer().WebhookMux()
	for _, path := range paths {
		hook, pattern := mux.Handler(&http.Request{Method: http.MethodPost, URL: &url.URL{Path: path}})
		if pattern != path {
			return fmt.Errorf("mcbuilder: webhook for %s was not registered at %s", gvk, path)
		}
		clusterPattern := ClusterWebhookPathPrefix + "{cluster}" + path
		if h, p := mux.Handler(&http.Request{Method: http.MethodPost, URL: &url.URL{Path: WebhookClusterPath("x", path)}}); h != nil && p == clusterPattern {
			continue // registered by an earlier builder for the same type, as the plain path was
		}
		// The same webhook, already instrumented under its plain path (which
		// keeps the metrics' cardinality independent of the fleet's size);
		// its context func reads the cluster from the path.
		mux.Handle(clusterPattern, hook)
	}
	return nil
}

func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
