package credentials_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"

	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
)

// withExtensions is a cluster entry carrying the reserved extensions.
func withExtensions(args, envs string) clientcmdv1.Cluster {
	c := clientcmdv1.Cluster{Server: "https://member.example:6443"}
	if args != "" {
		c.Extensions = append(c.Extensions, clientcmdv1.NamedExtension{Name: credentials.ExtensionAdditionalArgs, Extension: runtime.RawExtension{Raw: []byte(args)}})
	}
	if envs != "" {
		c.Extensions = append(c.Extensions, clientcmdv1.NamedExtension{Name: credentials.ExtensionAdditionalEnvs, Extension: runtime.RawExtension{Raw: []byte(envs)}})
	}
	return c
}

func TestProfileSourcedArgsAndEnvFollowThePolicies(t *testing.T) {
	base := credentials.AccessProvider{Name: "p", ExecConfig: clientcmdv1.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/plugin", Args: []string{"--configured"},
		Env: []clientcmdv1.ExecEnvVar{{Name: "MODE", Value: "configured"}},
	}}
	entry := withExtensions(`{"args":["--from-profile","x"]}`, `{"envs":[{"name":"MODE","value":"profile"},{"name":"EXTRA","value":"1"}]}`)
	for _, tc := range []struct {
		args     credentials.CLIArgsPolicy
		envs     credentials.EnvVarsPolicy
		wantArgs []string
		wantEnv  []string
	}{
		{"", "", []string{"--configured"}, []string{"MODE=configured"}}, // defaults: Ignore
		{credentials.CLIArgsIgnore, credentials.EnvVarsIgnore, []string{"--configured"}, []string{"MODE=configured"}},
		{credentials.CLIArgsAppend, "", []string{"--configured", "--from-profile", "x"}, []string{"MODE=configured"}},
		{"", credentials.EnvVarsAppendIfNotExists, []string{"--configured"}, []string{"MODE=configured", "EXTRA=1"}},
		{"", credentials.EnvVarsReplace, []string{"--configured"}, []string{"MODE=profile", "EXTRA=1"}},
	} {
		ap := base
		ap.ProfileSourcedCLIArgsPolicy, ap.ProfileSourcedEnvVarsPolicy = tc.args, tc.envs
		cfg, _, err := credentials.RESTConfig(ap, v1alpha1.AccessProvider{Name: "p", Cluster: entry}, credentials.ProfilePolicy{})
		if err != nil {
			t.Fatalf("args %q, envs %q: %v", tc.args, tc.envs, err)
		}
		var env []string
		for _, v := range cfg.ExecProvider.Env {
			env = append(env, v.Name+"="+v.Value)
		}
		if !slices.Equal(cfg.ExecProvider.Args, tc.wantArgs) || !slices.Equal(env, tc.wantEnv) {
			t.Errorf("args %q, envs %q: command line %q, env %q; want %q, %q", tc.args, tc.envs, cfg.ExecProvider.Args, env, tc.wantArgs, tc.wantEnv)
		}
	}
	// The configuration itself is never changed.
	if len(base.ExecConfig.Args) != 1 || base.ExecConfig.Env[0].Value != "configured" {
		t.Error("applying a profile changed the access provider's configuration")
	}

	// The bare list forms.
	ap := base
	ap.ProfileSourcedCLIArgsPolicy, ap.ProfileSourcedEnvVarsPolicy = credentials.CLIArgsAppend, credentials.EnvVarsReplace
	cfg, _, err := credentials.RESTConfig(ap, v1alpha1.AccessProvider{Name: "p", Cluster: withExtensions(`["--a"]`, `[{"name":"MODE","value":"list"}]`)}, credentials.ProfilePolicy{})
	if err != nil || !slices.Equal(cfg.ExecProvider.Args, []string{"--configured", "--a"}) || cfg.ExecProvider.Env[0].Value != "list" {
		t.Errorf("list forms: %v, %+v", err, cfg)
	}

	// The object form of additional-envs, sorted by name.
	ap = base
	ap.ProfileSourcedEnvVarsPolicy = credentials.EnvVarsAppendIfNotExists
	cfg, _, err = credentials.RESTConfig(ap, v1alpha1.AccessProvider{Name: "p", Cluster: withExtensions("", `{"B":"2","A":"1"}`)}, credentials.ProfilePolicy{})
	if err != nil || len(cfg.ExecProvider.Env) != 3 || cfg.ExecProvider.Env[1].Name != "A" || cfg.ExecProvider.Env[2].Name != "B" {
		t.Errorf("object form: %v, %+v", err, cfg)
	}

	// Malformed extensions are refused under a policy that reads them,
	// without quoting their values; ignored ones are not read.
	ap.ProfileSourcedCLIArgsPolicy = credentials.CLIArgsAppend
	for name, c := range map[string]clientcmdv1.Cluster{
		"args not a list":  withExtensions(`"--s3cret"`, ""),
		"args object":      withExtensions(`{"args":"--s3cret"}`, ""),
		"env object mixed": withExtensions("", `{"A":"s3cret","B":1}`),
		"arg with NUL":     withExtensions(`["a\u0000s3cret"]`, ""),
		"too many args":    withExtensions(`[`+strings.Repeat(`"a",`, 64)+`"a"]`, ""),
		"env not a list":   withExtensions("", `"s3cret"`),
		"env without name": withExtensions("", `[{"value":"s3cret"}]`),
		"env name with =":  withExtensions("", `[{"name":"A=B","value":"s3cret"}]`),
		"env set twice":    withExtensions("", `[{"name":"A","value":"s3cret"},{"name":"A","value":"s3cret"}]`),
	} {
		_, _, err := credentials.RESTConfig(ap, v1alpha1.AccessProvider{Name: "p", Cluster: c}, credentials.ProfilePolicy{})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := credentials.RESTConfig(base, v1alpha1.AccessProvider{Name: "p", Cluster: withExtensions(`"ignored"`, `"ignored"`)}, credentials.ProfilePolicy{}); err != nil {
		t.Errorf("malformed extensions under Ignore: %v", err)
	}
}

func TestLoadAccessProvidersReadsThePolicies(t *testing.T) {
	load := func(content string) ([]credentials.AccessProvider, error) {
		path := filepath.Join(t.TempDir(), "providers.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return credentials.LoadAccessProviders(path)
	}
	aps, err := load(`providers:
- name: token
  execConfig: {apiVersion: client.authentication.k8s.io/v1, command: plugin}
  profileSourcedCLIArgsPolicy: Append
  profileSourcedEnvVarsPolicy: AppendIfNotExists
- name: other
  execConfig: {apiVersion: client.authentication.k8s.io/v1, command: plugin}
  profileSourcedEnvVarsPolicy: Replace
`)
	if err != nil {
		t.Fatal(err)
	}
	if aps[0].ProfileSourcedCLIArgsPolicy != credentials.CLIArgsAppend || aps[0].ProfileSourcedEnvVarsPolicy != credentials.EnvVarsAppendIfNotExists ||
		aps[1].ProfileSourcedCLIArgsPolicy != "" || aps[1].ProfileSourcedEnvVarsPolicy != credentials.EnvVarsReplace {
		t.Errorf("policies read as %+v", aps)
	}
	for _, bad := range []string{
		"providers: [{name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x}, profileSourcedCLIArgsPolicy: Replace}]",
		"providers: [{name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x}, profileSourcedEnvVarsPolicy: Append}]",
		"providers: [{name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x}, profileSourcedArgsPolicy: Append}]",
		"providers: [{name: a, execConfig: {apiVersion: client.authentication.k8s.io/v1, command: x}}]\nextra: 1",
	} {
		if _, err := load(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
