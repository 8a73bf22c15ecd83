package credentials_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
)

func TestLoadAccessProvidersReadsTheKEPFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte(`providers:
- name: google
  execConfig:
    apiVersion: client.authentication.k8s.io/v1beta1
    command: gke-gcloud-auth-plugin
    provideClusterInfo: true
- name: token
  execConfig:
    apiVersion: client.authentication.k8s.io/v1
    command: /usr/local/bin/serviceaccount-token-plugin
    args: ["-service-account=fleet"]
    env: [{name: MODE, value: fleet}]
    provideClusterInfo: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	aps, err := credentials.LoadAccessProviders(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(aps) != 2 || aps[0].Name != "google" || aps[1].Name != "token" {
		t.Fatalf("read %+v", aps)
	}
	tok := aps[1].ExecConfig
	if tok.Command != "/usr/local/bin/serviceaccount-token-plugin" || len(tok.Args) != 1 || len(tok.Env) != 1 || tok.Env[0].Value != "fleet" || !tok.ProvideClusterInfo {
		t.Errorf("execConfig read as %+v", tok)
	}

	for name, content := range map[string]string{
		"unknown field":  "providers: [{name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x}, extra: 1}]",
		"no command":     "providers: [{name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1}}]",
		"empty":          "providers: []",
		"not a document": "providers: {",
	} {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(bad, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := credentials.LoadAccessProviders(bad); err == nil {
			t.Errorf("%s: accepted %q", name, content)
		}
	}
}

func TestSelectAccessProviderPrefersTheConfiguredOrder(t *testing.T) {
	configured := []credentials.AccessProvider{{Name: "first"}, {Name: "second"}}
	profile := &v1alpha1.ClusterProfile{Status: v1alpha1.ClusterProfileStatus{AccessProviders: []v1alpha1.AccessProvider{
		{Name: "other", Cluster: clientcmdv1.Cluster{Server: "https://other"}},
		{Name: "second", Cluster: clientcmdv1.Cluster{Server: "https://second"}},
		{Name: "first", Cluster: clientcmdv1.Cluster{Server: "https://first"}},
	}}}
	ap, entry, err := credentials.SelectAccessProvider(profile, configured)
	if err != nil || ap.Name != "first" || entry.Cluster.Server != "https://first" {
		t.Errorf("selected %q (%s), %v; want first", ap.Name, entry.Cluster.Server, err)
	}

	// The deprecated field is read when the new one is empty.
	//lint:ignore SA1019 the fallback to the deprecated field is under test
	deprecated := &v1alpha1.ClusterProfile{Status: v1alpha1.ClusterProfileStatus{CredentialProviders: []v1alpha1.CredentialProvider{
		{Name: "second", Cluster: clientcmdv1.Cluster{Server: "https://second"}},
	}}}
	if ap, _, err := credentials.SelectAccessProvider(deprecated, configured); err != nil || ap.Name != "second" {
		t.Errorf("from credentialProviders: selected %q, %v; want second", ap.Name, err)
	}

	none := &v1alpha1.ClusterProfile{Status: v1alpha1.ClusterProfileStatus{AccessProviders: []v1alpha1.AccessProvider{{Name: "gcp"}}}}
	_, _, err = credentials.SelectAccessProvider(none, configured)
	if !errors.Is(err, credentials.ErrNoAccessProvider) || !strings.Contains(err.Error(), "gcp") {
		t.Errorf("a profile offering nothing configured: %v", err)
	}
}

func TestRESTConfigUsesTheConfiguredPluginAndPassesTheExtension(t *testing.T) {
	ap := credentials.AccessProvider{Name: "token", ExecConfig: echo("client.authentication.k8s.io/v1", "{}")}
	entry := v1alpha1.AccessProvider{Name: "token", Cluster: clientcmdv1.Cluster{
		Server:                   "https://member.example:6443",
		CertificateAuthorityData: []byte("not a real CA, not read here"),
		ProxyURL:                 "http://proxy.example:3128",
		Extensions: []clientcmdv1.NamedExtension{{
			Name:      "client.authentication.k8s.io/exec",
			Extension: runtime.RawExtension{Raw: []byte(`{"audience":"fleet"}`)},
		}},
	}}
	// proxy-url is refused unless the policy allows it.
	if _, _, err := credentials.RESTConfig(ap, entry, credentials.ProfilePolicy{}); !errors.Is(err, pkgclusters.ErrKubeconfigRefused) || !strings.Contains(err.Error(), "proxy-url") {
		t.Errorf("a profile's proxy-url was not refused by default: %v", err)
	}
	cfg, hash, err := credentials.RESTConfig(ap, entry, credentials.ProfilePolicy{AllowProxyURL: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != entry.Cluster.Server || string(cfg.CAData) != string(entry.Cluster.CertificateAuthorityData) || cfg.Proxy == nil {
		t.Errorf("cluster entry not carried over: host %q, CA %q, proxy set %v", cfg.Host, cfg.CAData, cfg.Proxy != nil)
	}
	if cfg.BearerToken != "" || cfg.ExecProvider == nil || cfg.ExecProvider.Command != "/bin/echo" || !cfg.ExecProvider.ProvideClusterInfo {
		t.Fatalf("credentials do not come from the configured plugin: %+v", cfg.ExecProvider)
	}
	if cfg.ExecProvider.InteractiveMode != "Never" {
		t.Errorf("interactive mode %q, want Never", cfg.ExecProvider.InteractiveMode)
	}
	unknown, ok := cfg.ExecProvider.Config.(*runtime.Unknown)
	if !ok || string(unknown.Raw) != `{"audience":"fleet"}` {
		t.Errorf("the exec extension is not passed to the plugin: %#v", cfg.ExecProvider.Config)
	}

	// The hash follows the access information.
	entry.Cluster.Server = "https://elsewhere.example:6443"
	if _, other, err := credentials.RESTConfig(ap, entry, credentials.ProfilePolicy{AllowProxyURL: true}); err != nil || other == hash {
		t.Errorf("a new server keeps the hash (%v)", err)
	}

	// A cluster entry may not make the controller read a local file.
	entry.Cluster.CertificateAuthority = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	if _, _, err := credentials.RESTConfig(ap, entry, credentials.ProfilePolicy{AllowProxyURL: true}); !errors.Is(err, pkgclusters.ErrKubeconfigRefused) {
		t.Errorf("a certificate-authority file was accepted: %v", err)
	}
	entry.Cluster.CertificateAuthority, entry.Cluster.Server = "", ""
	if _, _, err := credentials.RESTConfig(ap, entry, credentials.ProfilePolicy{AllowProxyURL: true}); err == nil {
		t.Error("a cluster entry without a server was accepted")
	}
}

func TestRESTConfigDecidesWhereCredentialsGo(t *testing.T) {
	ap := credentials.AccessProvider{Name: "token", ExecConfig: echo("client.authentication.k8s.io/v1", "{}")}
	restricted := ap
	restricted.AllowedServers = []string{"10.0.0.0/8", "*.fleet.example", "api.example.com:6443", "127.0.0.1:6443"}
	hub := credentials.ProfilePolicy{HubServer: "https://hub.example:6443"}
	for _, tc := range []struct {
		ap      credentials.AccessProvider
		cluster clientcmdv1.Cluster
		policy  credentials.ProfilePolicy
		refused string // part of the error, "" if accepted
	}{
		{ap, clientcmdv1.Cluster{Server: "https://member.example:6443"}, hub, ""},
		{ap, clientcmdv1.Cluster{Server: "https://member.example:6443", InsecureSkipTLSVerify: true}, hub, "insecure-skip-tls-verify"},
		{ap, clientcmdv1.Cluster{Server: "https://member.example:6443", InsecureSkipTLSVerify: true}, credentials.ProfilePolicy{AllowInsecureSkipTLSVerify: true}, ""},
		{ap, clientcmdv1.Cluster{Server: "https://member.example:6443", TLSServerName: "other"}, hub, "tls-server-name"},
		{ap, clientcmdv1.Cluster{Server: "https://member.example:6443", TLSServerName: "other"}, credentials.ProfilePolicy{AllowTLSServerName: true}, ""},
		{ap, clientcmdv1.Cluster{Server: "http://member.example:6443"}, hub, "not https"},
		{ap, clientcmdv1.Cluster{Server: "https://127.0.0.1:6443"}, hub, "loopback"},
		{ap, clientcmdv1.Cluster{Server: "https://[::1]"}, hub, "loopback"},
		{ap, clientcmdv1.Cluster{Server: "https://localhost:8443"}, hub, "loopback"},
		{ap, clientcmdv1.Cluster{Server: "https://169.254.169.254"}, hub, "link-local"},
		{ap, clientcmdv1.Cluster{Server: "https://[fe80::1]:443"}, hub, "link-local"},
		{ap, clientcmdv1.Cluster{Server: "https://0.0.0.0:6443"}, hub, "unspecified"},
		{ap, clientcmdv1.Cluster{Server: "https://HUB.example:6443"}, hub, "hub"},
		{ap, clientcmdv1.Cluster{Server: "https://hub.example:7443"}, hub, ""},
		{restricted, clientcmdv1.Cluster{Server: "https://10.1.2.3:6443"}, hub, ""},
		{restricted, clientcmdv1.Cluster{Server: "https://11.1.2.3:6443"}, hub, "allowedServers"},
		{restricted, clientcmdv1.Cluster{Server: "https://eu.fleet.example"}, hub, ""},
		{restricted, clientcmdv1.Cluster{Server: "https://eu.fleet.example.attacker.net"}, hub, "allowedServers"},
		{restricted, clientcmdv1.Cluster{Server: "https://api.example.com:6443"}, hub, ""},
		{restricted, clientcmdv1.Cluster{Server: "https://api.example.com:443"}, hub, "allowedServers"},
		{restricted, clientcmdv1.Cluster{Server: "https://127.0.0.1:6443"}, hub, ""}, // listed explicitly
		{restricted, clientcmdv1.Cluster{Server: "https://127.0.0.1:6444"}, hub, "allowedServers"},
	} {
		_, _, err := credentials.RESTConfig(tc.ap, v1alpha1.AccessProvider{Name: "token", Cluster: tc.cluster}, tc.policy)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s (allowed %v): refused: %v", tc.cluster.Server, tc.ap.AllowedServers, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s (allowed %v): %v, want an error about %s", tc.cluster.Server, tc.ap.AllowedServers, err, tc.refused)
		}
	}
}

// echo is an exec config whose command prints out.
func echo(apiVersion, out string) clientcmdv1.ExecConfig {
	return clientcmdv1.ExecConfig{APIVersion: apiVersion, Command: "/bin/echo", Args: []string{out}, ProvideClusterInfo: true}
}
