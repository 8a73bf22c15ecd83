package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig with a context per server, named after
// the map key.
func writeKubeconfig(t *testing.T, servers map[string]string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for name, server := range servers {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: server}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "operator-token"}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestContextForMatchesTheServer(t *testing.T) {
	path := writeKubeconfig(t, map[string]string{
		"a": "https://a.example:6443", "b": "https://b.example:6443/", "b-admin": "https://b.example:6443",
	})
	for _, tc := range []struct {
		server, want, got string
		fails             bool
	}{
		{server: "https://a.example:6443", got: "a"},
		{server: "https://a.example:6443/", got: "a"},
		{server: "https://b.example:6443", fails: true}, // two contexts: the extension must choose
		{server: "https://b.example:6443", want: "b-admin", got: "b-admin"},
		{server: "https://a.example:6443", want: "b", fails: true}, // b is not a's server
		{server: "https://evil.example:6443", fails: true},
	} {
		got, err := contextFor(path, &clientauthv1.Cluster{Server: tc.server}, tc.want)
		if tc.fails != (err != nil) || got != tc.got {
			t.Errorf("contextFor(%s, %q) = %q, %v", tc.server, tc.want, got, err)
		}
	}
}

func TestContextForRefusesOtherProxyAndTLSSettings(t *testing.T) {
	path := writeKubeconfig(t, map[string]string{"a": "https://a.example:6443"})
	for name, c := range map[string]clientauthv1.Cluster{
		"proxy":       {ProxyURL: "http://127.0.0.1:3128"},
		"insecure":    {InsecureSkipTLSVerify: true},
		"server name": {TLSServerName: "attacker.example"},
	} {
		c.Server = "https://a.example:6443"
		if got, err := contextFor(path, &c, ""); err == nil {
			t.Errorf("%s: context %q chosen for a cluster with other settings", name, got)
		}
	}
}

func TestRunRefusesIncompleteInput(t *testing.T) {
	path := writeKubeconfig(t, map[string]string{"a": "https://a.example:6443"})
	args := []string{"-kubeconfig=" + path, "-service-account=fleet"}
	for name, tc := range map[string]struct {
		args     []string
		execInfo string
		want     string
	}{
		"no service account": {[]string{"-kubeconfig=" + path}, `{}`, "required"},
		"no exec info":       {args, "", "provideClusterInfo"},
		"no cluster":         {args, `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{}}`, "provideClusterInfo"},
		"bad version":        {args, `{"apiVersion":"client.authentication.k8s.io/v1alpha1","kind":"ExecCredential"}`, "apiVersion"},
		"not json":           {args, `{`, "decoding"},
		"unknown server": {args, `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
			"spec":{"cluster":{"server":"https://evil.example"}}}`, "no context"},
	} {
		err := run(tc.args, tc.execInfo, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "operator-token") {
			t.Errorf("%s: the error carries the operator's token", name)
		}
	}
}
