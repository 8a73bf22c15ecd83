package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const (
	// DefaultServiceAccountNamespace is the member namespace Register creates
	// the ServiceAccount in.
	DefaultServiceAccountNamespace = "multicluster-runtime"
	// DefaultServiceAccountName is the name of the ServiceAccount Register creates.
	DefaultServiceAccountName = "multicluster-runtime"
	// DefaultTokenExpiration is the lifetime Register requests for the token.
	// The member's API server may grant less; register again to rotate.
	DefaultTokenExpiration = 365 * 24 * time.Hour
)

// RegisterOptions configure Register.
type RegisterOptions struct {
	// ClusterName names the cluster, and so the Secret on the host. Required.
	ClusterName string
	// Namespace is the host namespace of the Secret. Defaults to DefaultNamespace.
	Namespace string
	// KubeconfigSecretLabel and KubeconfigSecretKey default to the provider's defaults.
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
	// TokenExpiration is the token lifetime requested. Defaults to
	// DefaultTokenExpiration.
	TokenExpiration time.Duration
	// Server is the member's API server URL as the host's controllers reach
	// it. Defaults to the member config's host.
	Server string
}

// Register makes a member cluster part of the fleet: in the member (reached
// with memberConfig, which needs rights to manage namespaces, ServiceAccounts
// and RBAC) it creates a ServiceAccount with the given rules and requests a
// token for it; on the host it creates or updates the labelled Secret holding
// a kubeconfig with that token. Running it again rotates the token and
// updates the rules. The token is never returned or logged.
func Register(ctx context.Context, memberConfig *rest.Config, host client.Client, opts RegisterOptions) (*corev1.Secret, error) {
	if opts.ClusterName == "" {
		return nil, errors.New("kubeconfig register: ClusterName is required")
	}
	setRegisterDefaults(&opts)
	member, err := client.New(memberConfig, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("cluster %q: connecting to the member: %w", opts.ClusterName, err)
	}
	token, err := serviceAccountToken(ctx, member, opts)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", opts.ClusterName, err)
	}
	kubeconfig, err := tokenKubeconfig(memberConfig, opts, token)
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
		secret.Data[opts.KubeconfigSecretKey] = kubeconfig
		return nil
	}); err != nil {
		return nil, fmt.Errorf("cluster %q: writing Secret %s/%s on the host: %w", opts.ClusterName, opts.Namespace, opts.ClusterName, err)
	}
	return secret, nil
}

func setRegisterDefaults(opts *RegisterOptions) {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.KubeconfigSecretLabel == "" {
		opts.KubeconfigSecretLabel = DefaultKubeconfigSecretLabel
	}
	if opts.KubeconfigSecretKey == "" {
		opts.KubeconfigSecretKey = DefaultKubeconfigSecretKey
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
func serviceAccountToken(ctx context.Context, member client.Client, opts RegisterOptions) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.ServiceAccountNamespace}}
	if err := member.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace %q: %w", ns.Name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: opts.ServiceAccountNamespace, Name: opts.ServiceAccountName}}
	if err := member.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}

	rbacName := "multicluster-runtime:" + opts.ServiceAccountNamespace + ":" + opts.ServiceAccountName
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: rbacName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, member, role, func() error {
		role.Rules = opts.Rules
		return nil
	}); err != nil {
		return "", fmt.Errorf("writing ClusterRole %q: %w", rbacName, err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rbacName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, member, binding, func() error {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbacName}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
		return nil
	}); err != nil {
		return "", fmt.Errorf("writing ClusterRoleBinding %q: %w", rbacName, err)
	}

	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(opts.TokenExpiration / time.Second)),
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
func tokenKubeconfig(member *rest.Config, opts RegisterOptions, token string) ([]byte, error) {
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
