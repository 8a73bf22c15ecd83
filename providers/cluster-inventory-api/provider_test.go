package clusterinventoryapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/mctest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
)

// saUser is the user the plugin's tokens authenticate as.
const saUser = "system:serviceaccount:" + saNamespace + ":" + saName

func TestProfilesEngageThroughThePluginAndFollowHealth(t *testing.T) {
	e := start(t, clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{
		pluginProvider(t, "sa-token", "-service-account="+saName),
	}})
	one := e.create(t, profile{name: "one", member: 1, healthy: true, providers: []string{"other", "sa-token"},
		properties: map[string]string{v1alpha1.PropertyClusterSet: "set-a"}})
	two := e.create(t, profile{name: "two", member: 2, healthy: true, providers: []string{"sa-token"}, deprecated: true})
	nameOne, nameTwo := e.ns+"/one", e.ns+"/two"
	first := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{nameOne: 1, nameTwo: 2})

	// The clusters authenticate with the plugin's ServiceAccount tokens, not
	// the operator's credentials.
	for name, cl := range first {
		if user := whoAmI(t, cl); user != saUser {
			t.Errorf("cluster %q authenticates as %q, want %q", name, user, saUser)
		}
	}
	if set, ok := e.provider.ClusterSet(nameOne); !ok || set != "set-a" {
		t.Errorf("ClusterSet(%q) = %q, %v; want set-a", nameOne, set, ok)
	}
	if _, ok := e.provider.ClusterSet(nameTwo); ok {
		t.Errorf("ClusterSet(%q) reports a set for a profile without the property", nameTwo)
	}

	// An unhealthy control plane disengages; the other cluster is untouched.
	e.setStatus(t, one, profile{member: 1, healthy: false, providers: []string{"sa-token"}})
	e.tracker.WaitDisengaged(t, first[nameOne])
	mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{nameTwo: 2})

	// Recovery re-engages with a new cluster.
	e.setStatus(t, one, profile{member: 1, healthy: true, providers: []string{"sa-token"}})
	again := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{nameOne: 1, nameTwo: 2})
	if again[nameOne] == first[nameOne] {
		t.Error("the recovered profile's cluster was not re-created")
	}
	if again[nameTwo] != first[nameTwo] {
		t.Error("the other profile's cluster was re-created")
	}

	// New access information (another server) re-engages there.
	e.setStatus(t, one, profile{member: 2, healthy: true, providers: []string{"sa-token"}})
	mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{nameOne: 2, nameTwo: 2})
	e.tracker.WaitDisengaged(t, again[nameOne])

	// Deleting a profile disengages its cluster.
	if err := e.hub.Delete(context.Background(), two); err != nil {
		t.Fatal(err)
	}
	mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{nameOne: 2})
}

func TestPluginFailuresAndUnknownAccessProvidersAreReported(t *testing.T) {
	// The plugins' environment is the operator's configuration: it may hold
	// secrets, and must not be logged.
	const secretEnv = "env-s3cret-never-logged"
	saToken := pluginProvider(t, "sa-token", "-service-account="+saName)
	exits := pluginProvider(t, "exits-non-zero") // no -service-account: the plugin exits 1
	for _, ap := range []*clusterinventoryapi.AccessProvider{&saToken, &exits} {
		ap.ExecConfig.Env = []clientcmdv1.ExecEnvVar{{Name: "PLUGIN_SECRET", Value: secretEnv}}
	}
	e := start(t, clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{
		saToken, exits,
		{Name: "bad-json", ExecConfig: echo("client.authentication.k8s.io/v1", "not an ExecCredential"), AllowedServers: memberServers()},
	}})
	e.create(t, profile{name: "good", member: 1, healthy: true, providers: []string{"sa-token"}})
	e.create(t, profile{name: "exits", member: 2, healthy: true, providers: []string{"exits-non-zero"}})
	e.create(t, profile{name: "garbage", member: 2, healthy: true, providers: []string{"bad-json"}})
	e.create(t, profile{name: "unknown-server", member: 0, healthy: true, providers: []string{"sa-token"}})
	// The exec extension reaches the plugin, which refuses a context whose
	// server is not the profile's.
	e.create(t, profile{name: "wrong-context", member: 1, context: 2, healthy: true, providers: []string{"sa-token"}})
	unknown := e.create(t, profile{name: "unknown", member: 2, healthy: true, providers: []string{"gcp", "azure"}})
	good := e.ns + "/good"
	engaged := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{good: 1})

	want := map[string]string{
		"exits":          clusterinventoryapi.ReasonEngageFailed,
		"garbage":        clusterinventoryapi.ReasonEngageFailed,
		"unknown-server": clusterinventoryapi.ReasonInvalidProfile, // not among the access provider's servers
		"wrong-context":  clusterinventoryapi.ReasonEngageFailed,
		"unknown":        clusterinventoryapi.ReasonNoAccessProvider,
	}
	ctx := context.Background()
	var events eventsv1.EventList
	mctest.Eventually(t, time.Minute, func() error {
		if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		for name, reason := range want {
			if !hasWarning(events.Items, name, reason) {
				return fmt.Errorf("no %s Warning Event on %s", reason, name)
			}
		}
		return nil
	})
	if hasWarning(events.Items, "good", clusterinventoryapi.ReasonEngageFailed) {
		t.Error("the healthy profile got a Warning Event")
	}
	for _, ev := range events.Items {
		if ev.Regarding.Name == "exits" && ev.Reason == clusterinventoryapi.ReasonEngageFailed && !strings.Contains(ev.Note, "exit code 1") {
			t.Errorf("the Event of a failing plugin does not say how it failed: %s", ev.Note)
		}
	}

	// The failing profiles are retried: a profile that starts offering a
	// working provider engages, and the healthy cluster was never touched.
	e.setStatus(t, unknown, profile{member: 2, healthy: true, providers: []string{"gcp", "sa-token"}})
	after := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{good: 1, e.ns + "/unknown": 2})
	if after[good] != engaged[good] || e.tracker.Count(good) != 1 {
		t.Error("failures of other profiles re-created the healthy cluster")
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "exits-non-zero") {
		t.Error("the failing access provider is not named in the logs")
	}
	// Neither the plugins' environment nor a token (a JWT: "eyJ...") appears
	// in logs or Events.
	if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{secretEnv, "eyJ"} {
		if strings.Contains(logs, leak) {
			t.Errorf("the logs carry %q", leak)
		}
		for _, ev := range events.Items {
			if strings.Contains(ev.Note, leak) {
				t.Errorf("Event on %s carries %q: %s", ev.Regarding.Name, leak, ev.Note)
			}
		}
	}
}

func TestClusterIDNaming(t *testing.T) {
	e := start(t, clusterinventoryapi.Options{
		AccessProviders: []clusterinventoryapi.AccessProvider{pluginProvider(t, "sa-token", "-service-account="+saName)},
		ClusterName:     clusterinventoryapi.ClusterID,
	})
	withID := func(id string, m int) profile {
		return profile{member: m, healthy: true, providers: []string{"sa-token"},
			properties: map[string]string{v1alpha1.PropertyClusterID: id, v1alpha1.PropertyClusterSet: "prod"}}
	}
	p := withID("eu-1", 1)
	p.name = "first"
	first := e.create(t, p)
	engaged := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"eu-1": 1})
	p = withID("eu-1", 2)
	p.name = "duplicate"
	e.create(t, p)
	e.create(t, profile{name: "no-id", member: 2, healthy: true, providers: []string{"sa-token"}})
	if key, ok := e.provider.ProfileOf("eu-1"); !ok || key.Name != "first" {
		t.Errorf("ProfileOf(eu-1) = %v, %v; want the profile first", key, ok)
	}
	if set, _ := e.provider.ClusterSet("eu-1"); set != "prod" {
		t.Errorf("ClusterSet(eu-1) = %q, want prod", set)
	}

	ctx := context.Background()
	var events eventsv1.EventList
	mctest.Eventually(t, time.Minute, func() error {
		if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		if got := e.tracker.Engaged(); len(got) != 1 || got["eu-1"] != engaged["eu-1"] {
			return fmt.Errorf("engaged %v, want only the first eu-1", got)
		}
		if !hasWarning(events.Items, "no-id", clusterinventoryapi.ReasonInvalidProfile) {
			return fmt.Errorf("no %s Event on the profile without an ID", clusterinventoryapi.ReasonInvalidProfile)
		}
		if !hasWarning(events.Items, "duplicate", clusterinventoryapi.ReasonDuplicateName) {
			return fmt.Errorf("no %s Event on the profile with a taken ID", clusterinventoryapi.ReasonDuplicateName)
		}
		return nil
	})

	// A new ID renames the cluster: the old name goes, the new one comes,
	// and the duplicate gets the freed name.
	e.setStatus(t, first, withID("eu-2", 1))
	mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"eu-1": 2, "eu-2": 1})
	e.tracker.WaitDisengaged(t, engaged["eu-1"])
}

func TestNewValidatesAccessProviders(t *testing.T) {
	ok := clusterinventoryapi.AccessProvider{Name: "a", ExecConfig: echo("client.authentication.k8s.io/v1", "{}")}
	noCommand := ok
	noCommand.ExecConfig.Command = ""
	badVersion := ok
	badVersion.ExecConfig.APIVersion = "client.authentication.k8s.io/v1alpha1"
	for name, aps := range map[string][]clusterinventoryapi.AccessProvider{
		"none":        nil,
		"no name":     {{ExecConfig: ok.ExecConfig}},
		"no command":  {noCommand},
		"bad version": {badVersion},
		"duplicate":   {ok, ok},
	} {
		if _, err := clusterinventoryapi.New(clusterinventoryapi.Options{AccessProviders: aps}); err == nil {
			t.Errorf("%s: New accepted %+v", name, aps)
		}
	}
	p, err := clusterinventoryapi.New(clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{ok}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(context.Background(), "nope"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Errorf("Get of an unknown cluster: %v, want ErrClusterNotFound", err)
	}
}

// echo is an exec config whose command prints out.
func echo(apiVersion, out string) clientcmdv1.ExecConfig {
	return clientcmdv1.ExecConfig{APIVersion: apiVersion, Command: "/bin/echo", Args: []string{out}, ProvideClusterInfo: true}
}

// whoAmI returns the user a cluster's client authenticates as.
func whoAmI(t *testing.T, cl cluster.Cluster) string {
	t.Helper()
	review := &authenticationv1.SelfSubjectReview{}
	if err := cl.GetClient().Create(context.Background(), review); err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return review.Status.UserInfo.Username
}

func hasWarning(events []eventsv1.Event, profile, reason string) bool {
	for _, ev := range events {
		if ev.Regarding.Kind == "ClusterProfile" && ev.Regarding.Name == profile && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
			return true
		}
	}
	return false
}

// A profile whose ID changes to one another profile holds lets go of the
// name it held at once, and waits for the new one: its old name does not
// stay engaged to it.
func TestRenamingToATakenIDLetsGoOfTheOldName(t *testing.T) {
	e := start(t, clusterinventoryapi.Options{
		AccessProviders: []clusterinventoryapi.AccessProvider{pluginProvider(t, "sa-token", "-service-account="+saName)},
		ClusterName:     clusterinventoryapi.ClusterID,
	})
	withID := func(name, id string, m int) profile {
		return profile{name: name, member: m, healthy: true, providers: []string{"sa-token"},
			properties: map[string]string{v1alpha1.PropertyClusterID: id}}
	}
	a := e.create(t, withID("a", "eu-1", 1))
	e.create(t, withID("b", "eu-2", 2))
	engaged := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"eu-1": 1, "eu-2": 2})

	e.setStatus(t, a, withID("a", "eu-2", 1))
	e.tracker.WaitDisengaged(t, engaged["eu-1"])
	mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"eu-2": 2})
	if _, ok := e.provider.ProfileOf("eu-1"); ok {
		t.Error("ProfileOf(eu-1) still names a profile")
	}
	ctx := context.Background()
	mctest.Eventually(t, time.Minute, func() error {
		var events eventsv1.EventList
		if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		if !hasWarning(events.Items, "a", clusterinventoryapi.ReasonDuplicateName) {
			return fmt.Errorf("no %s Event on the profile renamed to a taken ID", clusterinventoryapi.ReasonDuplicateName)
		}
		return nil
	})
}
