package onboard

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

const (
	// DefaultServiceAccountNamespace is the member namespace Cluster creates
	// the ServiceAccount in.
	DefaultServiceAccountNamespace = "multicluster-runtime"
	// DefaultServiceAccountName is the name of the ServiceAccount Cluster creates.
	DefaultServiceAccountName = "multicluster-runtime"
	// DefaultTokenExpiration is the lifetime Cluster requests for the token.
	// The member's API server may grant less; onboard again to rotate.
	DefaultTokenExpiration = 365 * 24 * time.Hour
	// TokenBindingLabel marks the member Secrets that Cluster binds its
	// tokens to; the value is the ServiceAccount's name. Deleting one revokes
	// the token bound to it.
	TokenBindingLabel = "multicluster-runtime.io/token-binding"
)

// Options configure Cluster.
type Options struct {
	// ClusterName names the cluster, and so the Secret on the host. Required.
	ClusterName string
	// Namespace is the host namespace of the Secret. Defaults to kubeconfig.DefaultNamespace.
	Namespace string
	// KubeconfigSecretLabel and KubeconfigSecretKey default to the kubeconfig provider's defaults.
	KubeconfigSecretLabel string
	KubeconfigSecretKey   string

	// ServiceAccountNamespace and ServiceAccountName name the member's
	// ServiceAccount. Default to DefaultServiceAccountNamespace and
	// DefaultServiceAccountName.
	ServiceAccountNamespace string
	ServiceAccountName      string
	// Rules are granted to the ServiceAccount cluster-wide through a
	// ClusterRole and ClusterRoleBinding named
	// "multicluster-runtime:<namespace>:<name>". Empty grants nothing beyond
	// what every authenticated user may do.
	Rules []rbacv1.PolicyRule
	// TokenExpiration is the token lifetime requested. Zero means
	// DefaultTokenExpiration; a negative value is an error.
	TokenExpiration time.Duration
	// Server is the member's API server URL as the host's controllers reach
	// it: an https URL without credentials or query. Defaults to the member
	// config's host.
	Server string
}

// Validate refuses options that would write an unusable or surprising Secret,
// before anything is created.
func (o *Options) Validate() error {
	if o.ClusterName == "" {
		return errors.New("onboard: ClusterName is required")
	}
	if errs := validation.IsDNS1123Subdomain(o.ClusterName); len(errs) > 0 {
		return fmt.Errorf("onboard: ClusterName %q names the Secret and must be a DNS subdomain: %s", o.ClusterName, strings.Join(errs, "; "))
	}
	if o.TokenExpiration < 0 {
		return fmt.Errorf("onboard: TokenExpiration %s must be positive", o.TokenExpiration)
	}
	if o.Server != "" {
		u, err := url.Parse(o.Server)
		switch {
		case err != nil:
			return fmt.Errorf("onboard: Server %q is not a URL", redact.URL(o.Server))
		case u.Scheme != "https" || u.Host == "":
			return fmt.Errorf("onboard: Server %q must be an https URL with a host", redact.URL(o.Server))
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			return fmt.Errorf("onboard: Server %q must not carry credentials, a query or a fragment", redact.URL(o.Server))
		}
	}
	return nil
}

// Cluster makes a cluster a member of the fleet: in the member (reached
// with memberConfig, which needs rights to manage namespaces, ServiceAccounts
// and RBAC) it creates a ServiceAccount with the given rules and requests a
// token for it; on the host it creates or updates the labelled Secret holding
// a kubeconfig with that token. Running it again rotates the token and
// updates the rules. The token is never returned or logged.
//
// The token is bound to a Secret created in the member for this registration
// (in the ServiceAccount's namespace, owned by the ServiceAccount): if a
// later step fails, Cluster deletes that Secret, which revokes the token, and
// every other object it created in this call.
func Cluster(ctx context.Context, memberConfig *rest.Config, host client.Client, opts Options) (_ *corev1.Secret, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	setDefaults(&opts)
	member, err := client.New(memberConfig, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: connecting to the member: %w", opts.ClusterName, err)
	}
	var created []client.Object
	defer func() {
		if err != nil {
			err = errors.Join(err, cleanup(member, created))
		}
	}()
	token, err := serviceAccountToken(ctx, member, opts, &created)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", opts.ClusterName, err)
	}
	kc, err := tokenKubeconfig(memberConfig, opts, token)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", opts.ClusterName, err)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.ClusterName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, host, secret, func() error {
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[opts.KubeconfigSecretLabel] = "true"
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[opts.KubeconfigSecretKey] = kc
		return nil
	}); err != nil {
		return nil, fmt.Errorf("cluster %q: writing Secret %s/%s on the host: %w", opts.ClusterName, opts.Namespace, opts.ClusterName, err)
	}
	return secret, nil
}

// cleanupTimeout bounds the clean-up after a failed onboarding, which runs
// even when the onboarding's context is done.
const cleanupTimeout = 30 * time.Second

// cleanup deletes what a failed onboarding created in the member, newest
// first: the token binding first, which revokes the token.
func cleanup(member client.Client, created []client.Object) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	for i := len(created) - 1; i >= 0; i-- {
		obj := created[i]
		if err := member.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cleaning up %T %q in the member: %w", obj, client.ObjectKeyFromObject(obj), err))
		}
	}
	return errors.Join(errs...)
}

func setDefaults(opts *Options) {
	if opts.Namespace == "" {
		opts.Namespace = kubeconfig.DefaultNamespace
	}
	if opts.KubeconfigSecretLabel == "" {
		opts.KubeconfigSecretLabel = kubeconfig.DefaultKubeconfigSecretLabel
	}
	if opts.KubeconfigSecretKey == "" {
		opts.KubeconfigSecretKey = kubeconfig.DefaultKubeconfigSecretKey
	}
	if opts.ServiceAccountNamespace == "" {
		opts.ServiceAccountNamespace = DefaultServiceAccountNamespace
	}
	if opts.ServiceAccountName == "" {
		opts.ServiceAccountName = DefaultServiceAccountName
	}
	if opts.TokenExpiration <= 0 {
		opts.TokenExpiration = DefaultTokenExpiration
	}
}

// serviceAccountToken creates the member's ServiceAccount and RBAC and
// returns a fresh token for it.
// Every object it creates is appended to created.
func serviceAccountToken(ctx context.Context, member client.Client, opts Options, created *[]client.Object) (string, error) {
	createIfMissing := func(obj client.Object) error {
		err := member.Create(ctx, obj)
		if err == nil {
			*created = append(*created, obj)
			return nil
		}
		if apierrors.IsAlreadyExists(err) {
			return member.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		}
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.ServiceAccountNamespace}}
	if err := createIfMissing(ns); err != nil {
		return "", fmt.Errorf("creating namespace %q: %w", ns.Name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: opts.ServiceAccountNamespace, Name: opts.ServiceAccountName}}
	if err := createIfMissing(sa); err != nil {
		return "", fmt.Errorf("creating ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}

	rbacName := "multicluster-runtime:" + opts.ServiceAccountNamespace + ":" + opts.ServiceAccountName
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: rbacName}}
	res, err := controllerutil.CreateOrUpdate(ctx, member, role, func() error {
		role.Rules = opts.Rules
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("writing ClusterRole %q: %w", rbacName, err)
	}
	if res == controllerutil.OperationResultCreated {
		*created = append(*created, role)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rbacName}}
	res, err = controllerutil.CreateOrUpdate(ctx, member, binding, func() error {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbacName}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("writing ClusterRoleBinding %q: %w", rbacName, err)
	}
	if res == controllerutil.OperationResultCreated {
		*created = append(*created, binding)
	}

	// The token lives as long as this object: deleting it revokes the token.
	bound := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace:    sa.Namespace,
		GenerateName: sa.Name + "-token-binding-",
		Labels:       map[string]string{TokenBindingLabel: sa.Name},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ServiceAccount", Name: sa.Name, UID: sa.UID,
		}},
	}, Type: corev1.SecretTypeOpaque}
	if err := member.Create(ctx, bound); err != nil {
		return "", fmt.Errorf("creating the token binding Secret in %q: %w", sa.Namespace, err)
	}
	*created = append(*created, bound)

	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(opts.TokenExpiration / time.Second)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: bound.Name, UID: bound.UID},
	}}
	if err := member.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	if req.Status.Token == "" {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: the API server returned none", sa.Namespace, sa.Name)
	}
	return req.Status.Token, nil
}

// tokenKubeconfig writes a kubeconfig for the member with the token.
func tokenKubeconfig(member *rest.Config, opts Options, token string) ([]byte, error) {
	server := opts.Server
	if server == "" {
		server = member.Host
	}
	ca := member.CAData
	if len(ca) == 0 && member.CAFile != "" {
		data, err := os.ReadFile(member.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the member's CA file: %w", err)
		}
		ca = data
	}
	name := opts.ClusterName
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, InsecureSkipTLSVerify: member.Insecure, TLSServerName: member.ServerName}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return out, nil
}
