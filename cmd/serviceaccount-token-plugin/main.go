// Command serviceaccount-token-plugin is a reference client-go exec
// credential plugin for the cluster-inventory-api provider
// (providers/cluster-inventory-api), for development and tests. It returns a
// short-lived token of a ServiceAccount on the member cluster.
//
// The controller's operator configures it as an access provider (KEP-5339),
// with provideClusterInfo so that client-go hands it the member's cluster
// entry from the ClusterProfile in KUBERNETES_EXEC_INFO:
//
//	providers:
//	- name: serviceaccount-token
//	  execConfig:
//	    apiVersion: client.authentication.k8s.io/v1
//	    command: /usr/local/bin/serviceaccount-token-plugin
//	    args:
//	    - -kubeconfig=/etc/fleet/operator.kubeconfig
//	    - -namespace=fleet-system
//	    - -service-account=fleet-controller
//	    provideClusterInfo: true
//
// -kubeconfig is the operator's own kubeconfig, with one context per member
// and rights to create tokens for the ServiceAccount there. The plugin uses
// the context whose cluster server is the server of the profile's cluster
// entry; the entry's client.authentication.k8s.io/exec extension may name the
// context ({"context": "eu-west-1"}) when several share a server. A server
// that no context of the operator's kubeconfig names is refused: a profile
// cannot point the operator's credentials at a server of its choice. Nor can
// it change how they get there: a proxy-url, insecure-skip-tls-verify,
// tls-server-name or CA other than the context's is refused. The
// ServiceAccount must exist on the member.
//
// The plugin requests a token (TokenRequest, -expiration) and prints an
// ExecCredential with the token and its expiry, in the apiVersion it was
// called with; client-go calls it again when the token expires. It exits
// non-zero with a message on stderr when anything fails, and never prints
// the token anywhere but stdout.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const execInfoEnv = "KUBERNETES_EXEC_INFO"

var apiVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}

func main() {
	if err := run(os.Args[1:], os.Getenv(execInfoEnv), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serviceaccount-token-plugin:", err)
		os.Exit(1)
	}
}

// extension is the plugin's part of the cluster entry's
// client.authentication.k8s.io/exec extension.
type extension struct {
	Context string `json:"context,omitempty"`
}

func run(args []string, execInfo string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serviceaccount-token-plugin", flag.ContinueOnError)
	var (
		kubeconfig     = fs.String("kubeconfig", "", "the operator's kubeconfig, one context per member (required)")
		namespace      = fs.String("namespace", "default", "namespace of the ServiceAccount on the member")
		serviceAccount = fs.String("service-account", "", "name of the ServiceAccount on the member (required)")
		expiration     = fs.Duration("expiration", time.Hour, "lifetime of the token requested")
		timeout        = fs.Duration("timeout", 30*time.Second, "bound on the whole run")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" || *serviceAccount == "" {
		return errors.New("-kubeconfig and -service-account are required")
	}
	if execInfo == "" {
		return errors.New(execInfoEnv + " is empty: configure the access provider with provideClusterInfo: true")
	}
	var in clientauthv1.ExecCredential
	if err := json.Unmarshal([]byte(execInfo), &in); err != nil {
		return fmt.Errorf("decoding %s: %w", execInfoEnv, err)
	}
	if !slices.Contains(apiVersions, in.APIVersion) {
		return fmt.Errorf("%s: unsupported apiVersion %q", execInfoEnv, in.APIVersion)
	}
	if in.Spec.Cluster == nil || in.Spec.Cluster.Server == "" {
		return errors.New(execInfoEnv + " carries no cluster: configure the access provider with provideClusterInfo: true")
	}
	var ext extension
	if raw := in.Spec.Cluster.Config.Raw; len(raw) > 0 {
		if err := json.Unmarshal(raw, &ext); err != nil {
			return fmt.Errorf("decoding the client.authentication.k8s.io/exec extension: %w", err)
		}
	}

	contextName, err := contextFor(*kubeconfig, in.Spec.Cluster, ext.Context)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: *kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: contextName},
	).ClientConfig()
	if err != nil {
		return fmt.Errorf("context %q of %s: %w", contextName, *kubeconfig, err)
	}
	cfg.Timeout = *timeout
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("context %q: %w", contextName, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: *namespace, Name: *serviceAccount}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(*expiration / time.Second)),
	}}
	if err := c.SubResource("token").Create(ctx, sa, req); err != nil {
		return fmt.Errorf("requesting a token for ServiceAccount %s/%s through context %q: %w", *namespace, *serviceAccount, contextName, err)
	}
	if req.Status.Token == "" {
		return fmt.Errorf("the TokenRequest for ServiceAccount %s/%s returned no token", *namespace, *serviceAccount)
	}

	out := clientauthv1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: in.APIVersion, Kind: "ExecCredential"},
		Status: &clientauthv1.ExecCredentialStatus{
			Token:               req.Status.Token,
			ExpirationTimestamp: &req.Status.ExpirationTimestamp,
		},
	}
	return json.NewEncoder(stdout).Encode(out)
}

// contextFor returns the context of the kubeconfig whose cluster's server is
// the server of cluster: the one named want, or else the only one. The
// cluster's proxy and TLS settings must be those of the context's cluster
// (or, for the CA, none), or the token could reach a proxy or a server of
// the profile writer's choice.
func contextFor(path string, cluster *clientauthv1.Cluster, want string) (string, error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", fmt.Errorf("loading the operator's kubeconfig: %w", err)
	}
	name, err := contextForServer(kc, cluster.Server, want)
	if err != nil {
		return "", err
	}
	cl := kc.Clusters[kc.Contexts[name].Cluster]
	switch {
	case cluster.ProxyURL != cl.ProxyURL:
		return "", fmt.Errorf("the cluster's proxy-url differs from context %q's: refusing to send a token through it", name)
	case cluster.InsecureSkipTLSVerify && !cl.InsecureSkipTLSVerify:
		return "", fmt.Errorf("the cluster sets insecure-skip-tls-verify, context %q does not: refusing to send a token", name)
	case cluster.TLSServerName != cl.TLSServerName:
		return "", fmt.Errorf("the cluster's tls-server-name differs from context %q's: refusing to send a token", name)
	case len(cl.CertificateAuthorityData) > 0 && !bytes.Equal(cluster.CertificateAuthorityData, cl.CertificateAuthorityData):
		return "", fmt.Errorf("the cluster's certificate-authority-data differs from context %q's: refusing to send a token", name)
	}
	return name, nil
}

func contextForServer(kc *clientcmdapi.Config, server, want string) (string, error) {
	server = strings.TrimRight(server, "/")
	var matches []string
	for name, kctx := range kc.Contexts {
		cl, ok := kc.Clusters[kctx.Cluster]
		if !ok || strings.TrimRight(cl.Server, "/") != server {
			continue
		}
		if want == "" || want == name {
			matches = append(matches, name)
		}
	}
	slices.Sort(matches)
	switch {
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) == 0 && want != "":
		return "", fmt.Errorf("the operator's kubeconfig has no context %q for server %s", want, server)
	case len(matches) == 0:
		return "", fmt.Errorf("the operator's kubeconfig has no context for server %s", server)
	default:
		return "", fmt.Errorf("the operator's kubeconfig has several contexts for server %s (%v): name one in the cluster's client.authentication.k8s.io/exec extension", server, matches)
	}
}
