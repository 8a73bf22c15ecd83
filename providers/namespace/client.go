package namespace

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// scope maps between a virtual cluster, whose namespaced objects live in
// namespace "default", and its backing namespace on the shared API server,
// which names the cluster.
type scope struct {
	namespace string
	typeInfo
}

// typeInfo is what the shared client knows of types (which are namespaced),
// for the virtual cluster's client to answer with. Only these methods of it:
// a verb of the shared client must never be reached unmapped.
type typeInfo interface {
	Scheme() *runtime.Scheme
	RESTMapper() meta.RESTMapper
	GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error)
	IsObjectNamespaced(obj runtime.Object) (bool, error)
}

var namespacesResource = schema.GroupResource{Resource: "namespaces"}

// backing returns the backing namespace for a namespace named inside the
// virtual cluster: "" and "default" map to it; any other namespace does not
// exist there.
func (s *scope) backing(ns string) (string, error) {
	if ns == "" || ns == VirtualNamespace {
		return s.namespace, nil
	}
	return "", fmt.Errorf("cluster %q: a namespace virtual cluster has only namespace %q: %w",
		s.namespace, VirtualNamespace, apierrors.NewNotFound(namespacesResource, ns))
}

func (s *scope) namespaced(obj runtime.Object) (bool, error) {
	ok, err := s.IsObjectNamespaced(obj)
	if err != nil {
		return false, fmt.Errorf("cluster %q: %w", s.namespace, err)
	}
	return ok, nil
}

// listNamespaced reports whether the items of a list type are namespaced.
func (s *scope) listNamespaced(list client.ObjectList) (bool, error) {
	gvk, err := s.GroupVersionKindFor(list)
	if err != nil {
		return false, fmt.Errorf("cluster %q: %w", s.namespace, err)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	ok, err := apiutil.IsGVKNamespaced(gvk, s.RESTMapper())
	if err != nil {
		return false, fmt.Errorf("cluster %q: %w", s.namespace, err)
	}
	return ok, nil
}

// in runs do with obj, if its type is namespaced, moved into the backing
// namespace, and with an optional subresource body that names the virtual
// namespace moved there too. After, it moves them back into the virtual
// namespace, and a body the server filled in the backing namespace as well.
func (s *scope) in(obj client.Object, body runtime.Object, do func() error) error {
	namespaced, err := s.namespaced(obj)
	if err != nil {
		return err
	}
	if namespaced {
		ns, err := s.backing(obj.GetNamespace())
		if err != nil {
			return err
		}
		obj.SetNamespace(ns)
		defer obj.SetNamespace(VirtualNamespace)
	}
	if b, ok := body.(client.Object); ok && b != nil {
		if b.GetNamespace() == VirtualNamespace {
			b.SetNamespace(s.namespace)
		}
		defer func() {
			if b.GetNamespace() == s.namespace {
				b.SetNamespace(VirtualNamespace)
			}
		}()
	}
	return do()
}

// selectBacking narrows a selection of a namespaced type (a List's, a
// DeleteAllOf's) to the backing namespace: its namespace, and a
// metadata.namespace field requirement.
func (s *scope) selectBacking(o *client.ListOptions) error {
	var err error
	if o.Namespace, err = s.backing(o.Namespace); err != nil || o.FieldSelector == nil {
		return err
	}
	o.FieldSelector, err = o.FieldSelector.Transform(func(field, value string) (string, string, error) {
		if field == "metadata.namespace" && (value == VirtualNamespace || value == "") {
			return field, s.namespace, nil
		}
		return field, value, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %q: %w", s.namespace, err)
	}
	return nil
}

// nsReader is a client.Reader scoped to a virtual cluster.
type nsReader struct {
	*scope
	r client.Reader
}

var _ client.Reader = &nsReader{}

// Get reads an object; a namespaced one from the backing namespace.
func (c *nsReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	namespaced, err := c.namespaced(obj)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.r.Get(ctx, key, obj, opts...)
	}
	if key.Namespace, err = c.backing(key.Namespace); err != nil {
		return err
	}
	o := (&client.GetOptions{}).ApplyOptions(opts)
	o.UnsafeDisableDeepCopy = nil // the object is rewritten: it must be a copy
	if err := c.r.Get(ctx, key, obj, o); err != nil {
		return err
	}
	obj.SetNamespace(VirtualNamespace)
	return nil
}

// List lists objects; namespaced ones of the backing namespace only.
func (c *nsReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	namespaced, err := c.listNamespaced(list)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.r.List(ctx, list, opts...)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if err := c.selectBacking(o); err != nil {
		return err
	}
	o.UnsafeDisableDeepCopy = nil // the items are rewritten: they must be copies
	if err := c.r.List(ctx, list, o); err != nil {
		return err
	}
	return meta.EachListItem(list, func(item runtime.Object) error {
		if m, ok := item.(namespaceSetter); ok {
			m.SetNamespace(VirtualNamespace)
		}
		return nil
	})
}

type namespaceSetter interface{ SetNamespace(string) }

// nsClient is a client.Client scoped to a virtual cluster: namespaced objects
// are read from and written to the backing namespace and appear in namespace
// "default"; cluster-scoped objects are those of the shared API server.
type nsClient struct {
	nsReader
	c client.Client
}

var _ client.Client = &nsClient{}

// Create creates obj.
func (c *nsClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.in(obj, nil, func() error { return c.c.Create(ctx, obj, opts...) })
}

// Update updates obj.
func (c *nsClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.in(obj, nil, func() error { return c.c.Update(ctx, obj, opts...) })
}

// Delete deletes obj.
func (c *nsClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.in(obj, nil, func() error { return c.c.Delete(ctx, obj, opts...) })
}

// Patch patches obj. Merge, JSON and strategic-merge patches are computed in
// the virtual namespace; server-side apply patches carry the backing one.
func (c *nsClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	p, err := c.patch(obj, patch)
	if err != nil {
		return err
	}
	return c.in(obj, nil, func() error { return c.c.Patch(ctx, obj, p, opts...) })
}

// patch computes a patch's body before obj moves namespace, except for
// server-side apply, whose body is obj itself and must name the backing one.
func (c *scope) patch(obj client.Object, patch client.Patch) (client.Patch, error) {
	switch patch.Type() {
	case types.ApplyPatchType:
		return &applyPatch{inner: patch, scope: c}, nil
	case types.ApplyCBORPatchType:
		return patch, nil // computed from obj once it is in the backing namespace
	}
	data, err := patch.Data(obj)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: computing %s patch: %w", c.namespace, patch.Type(), err)
	}
	return client.RawPatch(patch.Type(), data), nil
}

// DeleteAllOf deletes all objects of obj's type matching opts; a namespaced
// type's in the backing namespace only, never across namespaces.
func (c *nsClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	namespaced, err := c.namespaced(obj)
	if err != nil {
		return err
	}
	if !namespaced {
		return c.c.DeleteAllOf(ctx, obj, opts...)
	}
	o := (&client.DeleteAllOfOptions{}).ApplyOptions(opts)
	if err := c.selectBacking(&o.ListOptions); err != nil {
		return err
	}
	return c.c.DeleteAllOf(ctx, obj, o)
}

// Apply applies an apply configuration (server-side apply) and fills it with
// the result.
func (c *nsClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.apply(obj, func(u runtime.ApplyConfiguration) error { return c.c.Apply(ctx, u, opts...) })
}

// apply runs do on an unstructured copy of ac moved into the backing
// namespace, then fills ac with the result, back in the virtual namespace.
func (c *scope) apply(ac runtime.ApplyConfiguration, do func(runtime.ApplyConfiguration) error) error {
	u, err := c.unstructuredApply(ac)
	if err != nil {
		return err
	}
	if err := do(client.ApplyConfigurationFromUnstructured(u)); err != nil {
		return err
	}
	if u.GetNamespace() == c.namespace {
		u.SetNamespace(VirtualNamespace)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ac); err != nil {
		return fmt.Errorf("cluster %q: decoding the apply result into %T: %w", c.namespace, ac, err)
	}
	return nil
}

func (c *scope) unstructuredApply(ac runtime.ApplyConfiguration) (*unstructured.Unstructured, error) {
	if ac == nil {
		return nil, fmt.Errorf("cluster %q: nil apply configuration", c.namespace)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ac)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: converting %T: %w", c.namespace, ac, err)
	}
	u := &unstructured.Unstructured{Object: m}
	namespaced, err := apiutil.IsGVKNamespaced(u.GroupVersionKind(), c.RESTMapper())
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", c.namespace, err)
	}
	if namespaced {
		ns, err := c.backing(u.GetNamespace())
		if err != nil {
			return nil, err
		}
		u.SetNamespace(ns)
	}
	return u, nil
}

// Status returns the status subresource client.
func (c *nsClient) Status() client.SubResourceWriter { return c.SubResource("status") }

// SubResource returns a client for the named subresource.
func (c *nsClient) SubResource(subResource string) client.SubResourceClient {
	return &nsSubResourceClient{scope: c.scope, c: c.c.SubResource(subResource)}
}

// nsSubResourceClient is a subresource client scoped to a virtual cluster.
type nsSubResourceClient struct {
	*scope
	c client.SubResourceClient
}

var _ client.SubResourceClient = &nsSubResourceClient{}

// Get reads obj's subresource into subResource.
func (c *nsSubResourceClient) Get(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceGetOption) error {
	return c.in(obj, subResource, func() error { return c.c.Get(ctx, obj, subResource, opts...) })
}

// Create creates subResource for obj (e.g. an eviction or a token request).
func (c *nsSubResourceClient) Create(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	return c.in(obj, subResource, func() error { return c.c.Create(ctx, obj, subResource, opts...) })
}

// Update updates obj's subresource.
func (c *nsSubResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	o := (&client.SubResourceUpdateOptions{}).ApplyOptions(opts)
	return c.in(obj, o.SubResourceBody, func() error { return c.c.Update(ctx, obj, o) })
}

// Patch patches obj's subresource.
func (c *nsSubResourceClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	o := (&client.SubResourcePatchOptions{}).ApplyOptions(opts)
	body := client.Object(obj)
	if o.SubResourceBody != nil {
		body = o.SubResourceBody
	}
	p, err := c.patch(body, patch)
	if err != nil {
		return err
	}
	return c.in(obj, o.SubResourceBody, func() error { return c.c.Patch(ctx, obj, p, o) })
}

// Apply applies an apply configuration to obj's subresource.
func (c *nsSubResourceClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	o := (&client.SubResourceApplyOptions{}).ApplyOpts(opts)
	if o.SubResourceBody != nil {
		body, err := c.unstructuredApply(o.SubResourceBody)
		if err != nil {
			return err
		}
		o.SubResourceBody = client.ApplyConfigurationFromUnstructured(body)
	}
	return c.apply(obj, func(u runtime.ApplyConfiguration) error { return c.c.Apply(ctx, u, o) })
}

// applyPatch is a server-side apply patch computed once obj is in the backing
// namespace. A body that still names the virtual namespace (a raw patch
// written for the virtual cluster) is moved into the backing one.
type applyPatch struct {
	inner client.Patch
	scope *scope
}

func (a *applyPatch) Type() types.PatchType { return a.inner.Type() }

func (a *applyPatch) Data(obj client.Object) ([]byte, error) {
	data, err := a.inner.Data(obj)
	u := &unstructured.Unstructured{}
	if err != nil || u.UnmarshalJSON(data) != nil || u.GetNamespace() != VirtualNamespace {
		return data, err // not an object naming the virtual namespace: the server judges it
	}
	u.SetNamespace(a.scope.namespace)
	return u.MarshalJSON()
}
