package clusterinventoryapi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
)

// withExtensions is a cluster entry carrying the reserved extensions.
func withExtensions(args, envs string) clientcmdv1.Cluster {
	c := clientcmdv1.Cluster{Server: "https://member.example:6443"}
	if args != "" {
		c.Extensions = append(c.Extensions, clientcmdv1.NamedExtension{Name: clusterinventoryapi.ExtensionAdditionalArgs, Extension: runtime.RawExtension{Raw: []byte(args)}})
	}
	if envs != "" {
		c.Extensions = append(c.Extensions, clientcmdv1.NamedExtension{Name: clusterinventoryapi.ExtensionAdditionalEnvs, Extension: runtime.RawExtension{Raw: []byte(envs)}})
	}
	return c
}

func TestProfileSourcedArgsAndEnvFollowThePolicies(t *testing.T) {
	base := clusterinventoryapi.AccessProvider{Name: "p", ExecConfig: clientcmdv1.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/plugin", Args: []string{"--configured"},
		Env: []clientcmdv1.ExecEnvVar{{Name: "MODE", Value: "configured"}},
	}}
	entry := withExtensions(`{"args":["--from-profile","x"]}`, `{"envs":[{"name":"MODE","value":"profile"},{"name":"EXTRA","value":"1"}]}`)
	for _, tc := range []struct {
		args     clusterinventoryapi.CLIArgsPolicy
		envs     clusterinventoryapi.EnvVarsPolicy
		wantArgs []string
		wantEnv  []string
	}{
		{"", "", []string{"--configured"}, []string{"MODE=configured"}}, // defaults: Ignore
		{clusterinventoryapi.CLIArgsIgnore, clusterinventoryapi.EnvVarsIgnore, []string{"--configured"}, []string{"MODE=configured"}},
		{clusterinventoryapi.CLIArgsAppend, "", []string{"--configured", "--from-profile", "x"}, []string{"MODE=configured"}},
		{"", clusterinventoryapi.EnvVarsAppendIfNotExists, []string{"--configured"}, []string{"MODE=configured", "EXTRA=1"}},
		{"", clusterinventoryapi.EnvVarsReplace, []string{"--configured"}, []string{"MODE=profile", "EXTRA=1"}},
	} {
		ap := base
		ap.ProfileSourcedCLIArgsPolicy, ap.ProfileSourcedEnvVarsPolicy = tc.args, tc.envs
		cfg, _, err := clusterinventoryapi.RESTConfig(ap, v1alpha1.AccessProvider{Name: "p", Cluster: entry}, clusterinventoryapi.ProfilePolicy{})
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
	ap.ProfileSourcedCLIArgsPolicy, ap.ProfileSourcedEnvVarsPolicy = clusterinventoryapi.CLIArgsAppend, clusterinventoryapi.EnvVarsReplace
	cfg, _, err := clusterinventoryapi.RESTConfig(ap, v1alpha1.AccessProvider{Name: "p", Cluster: withExtensions(`["--a"]`, `[{"name":"MODE","value":"list"}]`)}, clusterinventoryapi.ProfilePolicy{})
	if err != nil || !slices.Equal(cfg.ExecProvider.Args, []string{"--configured", "--a"}) || cfg.ExecProvider.Env[0].Value != "list" {
		t.Errorf("list forms: %v, %+v", err, cfg)
	}

	// The object form of additional-envs, sorted by name.
	ap = base
	ap.ProfileSourcedEnvVarsPolicy = clusterinventoryapi.EnvVarsAppendIfNotExists
	cfg, _, err = clusterinventoryapi.RESTConfig(ap, v1alpha1.AccessProvider{Name: "p", Cluster: withExtensions("", `{"B":"2","A":"1"}`)}, clusterinventoryapi.ProfilePolicy{})
	if err != nil || len(cfg.ExecProvider.Env) != 3 || cfg.ExecProvider.Env[1].Name != "A" || cfg.ExecProvider.Env[2].Name != "B" {
		t.Errorf("object form: %v, %+v", err, cfg)
	}

	// Malformed extensions are refused under a policy that reads them,
	// without quoting their values; ignored ones are not read.
	ap.ProfileSourcedCLIArgsPolicy = clusterinventoryapi.CLIArgsAppend
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
		_, _, err := clusterinventoryapi.RESTConfig(ap, v1alpha1.AccessProvider{Name: "p", Cluster: c}, clusterinventoryapi.ProfilePolicy{})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := clusterinventoryapi.RESTConfig(base, v1alpha1.AccessProvider{Name: "p", Cluster: withExtensions(`"ignored"`, `"ignored"`)}, clusterinventoryapi.ProfilePolicy{}); err != nil {
		t.Errorf("malformed extensions under Ignore: %v", err)
	}
}

func TestLoadAccessProvidersReadsThePolicies(t *testing.T) {
	load := func(content string) ([]clusterinventoryapi.AccessProvider, error) {
		path := filepath.Join(t.TempDir(), "providers.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return clusterinventoryapi.LoadAccessProviders(path)
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
	if aps[0].ProfileSourcedCLIArgsPolicy != clusterinventoryapi.CLIArgsAppend || aps[0].ProfileSourcedEnvVarsPolicy != clusterinventoryapi.EnvVarsAppendIfNotExists ||
		aps[1].ProfileSourcedCLIArgsPolicy != "" || aps[1].ProfileSourcedEnvVarsPolicy != clusterinventoryapi.EnvVarsReplace {
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

// With the reference plugin on real members: a profile supplies the
// -service-account argument the configuration lacks. It engages only where
// the access provider appends profile arguments.
func TestProfileSourcedArgsReachThePluginOnlyWhenAppended(t *testing.T) {
	appends := pluginProvider(t, "appends")
	appends.ProfileSourcedCLIArgsPolicy = clusterinventoryapi.CLIArgsAppend
	ignores := pluginProvider(t, "ignores")
	e := start(t, clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{appends, ignores}})
	for name, ap := range map[string]string{"appended": "appends", "ignored": "ignores"} {
		c := memberCluster(t, 1, 0)
		c.Extensions = append(c.Extensions, clientcmdv1.NamedExtension{
			Name: clusterinventoryapi.ExtensionAdditionalArgs, Extension: runtime.RawExtension{Raw: []byte(`{"args":["-service-account=` + saName + `"]}`)},
		})
		e.createRaw(t, name, ap, c)
	}
	engaged := fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{e.ns + "/appended": 1})
	if user := whoAmI(t, engaged[e.ns+"/appended"]); user != saUser {
		t.Errorf("authenticates as %q, want %q", user, saUser)
	}
	ctx := context.Background()
	fleettest.Eventually(t, time.Minute, func() error {
		var events eventsv1.EventList
		if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		if !hasWarning(events.Items, "ignored", clusterinventoryapi.ReasonEngageFailed) {
			return fmt.Errorf("no %s Event on the profile whose arguments were ignored", clusterinventoryapi.ReasonEngageFailed)
		}
		return nil
	})
	if _, ok := e.tracker.Engaged()[e.ns+"/ignored"]; ok {
		t.Error("the profile's arguments reached a plugin whose policy ignores them")
	}
}
