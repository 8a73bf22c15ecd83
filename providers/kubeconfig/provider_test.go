package kubeconfig_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

func TestSecretsEngageRotateAndDisengage(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	for i, name := range []string{"alpha", "beta", "gamma"} {
		if err := e.host.Create(ctx, e.secret(t, name, i)); err != nil {
			t.Fatal(err)
		}
	}
	// An unlabelled Secret, and a labelled one in another namespace, are ignored.
	unlabelled := e.secret(t, "ignored", 1)
	unlabelled.Labels = nil
	if err := e.host.Create(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	first := fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"alpha": 0, "beta": 1, "gamma": 2})

	// Rotating beta's kubeconfig to another control plane re-engages it there.
	beta := e.secret(t, "beta", 2)
	if err := e.host.Update(ctx, beta); err != nil {
		t.Fatal(err)
	}
	rotated := fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"alpha": 0, "beta": 2, "gamma": 2})
	e.tracker.WaitDisengaged(t, first["beta"])
	if rotated["alpha"] != first["alpha"] || rotated["gamma"] != first["gamma"] {
		t.Error("rotating one Secret re-created other clusters")
	}

	// An annotation-only change keeps the same cluster. The Secret update that
	// follows is queued after it (one worker, FIFO), so once gamma is gone the
	// annotation has been processed.
	alpha := &corev1.Secret{}
	if err := e.host.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "alpha"}, alpha); err != nil {
		t.Fatal(err)
	}
	alpha.Annotations = map[string]string{"example.com/owner": "platform"}
	if err := e.host.Update(ctx, alpha); err != nil {
		t.Fatal(err)
	}

	// Removing the label disengages.
	gamma := &corev1.Secret{}
	if err := e.host.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "gamma"}, gamma); err != nil {
		t.Fatal(err)
	}
	delete(gamma.Labels, kubeconfig.DefaultKubeconfigSecretLabel)
	if err := e.host.Update(ctx, gamma); err != nil {
		t.Fatal(err)
	}
	afterUnlabel := fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"alpha": 0, "beta": 2})
	if afterUnlabel["alpha"] != first["alpha"] {
		t.Error("an annotation-only change re-created the cluster")
	}

	// Deleting a Secret disengages.
	if err := e.host.Delete(ctx, beta); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"alpha": 0})
}

func TestBadSecretsAreReportedAndDoNotAffectOthers(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const token = "tok3n-that-must-never-be-printed"

	if err := e.host.Create(ctx, e.secret(t, "good", 1)); err != nil {
		t.Fatal(err)
	}
	missingKey := e.secret(t, "missing-key", 0)
	missingKey.Data = map[string][]byte{"wrong-key": []byte("token: " + token)}
	malformed := e.secret(t, "malformed", 0)
	malformed.Data[kubeconfig.DefaultKubeconfigSecretKey] = []byte("apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: [" + token + "]}}]\n")
	unreachable := e.secret(t, "unreachable", 0)
	unreachable.Data[kubeconfig.DefaultKubeconfigSecretKey] = []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: ` + token + `}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	for _, s := range []*corev1.Secret{missingKey, malformed, unreachable} {
		if err := e.host.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"good": 1})

	// Each bad Secret gets a Warning Event naming the problem.
	want := map[string]string{
		"missing-key": kubeconfig.ReasonInvalidKubeconfig,
		"malformed":   kubeconfig.ReasonInvalidKubeconfig,
		"unreachable": kubeconfig.ReasonEngageFailed,
	}
	var events eventsv1.EventList
	fleettest.Eventually(t, time.Minute, func() error { // a Warning Event on every bad Secret
		if err := e.host.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		for name, reason := range want {
			if !hasEvent(events.Items, name, reason) {
				return fmt.Errorf("no %s Event on %s", reason, name)
			}
		}
		return nil
	})

	// Others still come and go while the bad ones are retried.
	if err := e.host.Create(ctx, e.secret(t, "late", 2)); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"good": 1, "late": 2})

	// Fixing a bad Secret engages it.
	fixed := e.secret(t, "malformed", 0)
	if err := e.host.Get(ctx, client.ObjectKeyFromObject(malformed), malformed); err != nil {
		t.Fatal(err)
	}
	malformed.Data = fixed.Data
	if err := e.host.Update(ctx, malformed); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"good": 1, "late": 2, "malformed": 0})

	if err := e.host.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if strings.Contains(ev.Note, token) {
			t.Errorf("Event %s/%s on %s carries the token: %s", ev.Namespace, ev.Name, ev.Regarding.Name, ev.Note)
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "unreachable") || !strings.Contains(logs, "malformed") {
		t.Errorf("the bad Secrets are not named in the logs:\n%s", logs)
	}
	if strings.Contains(logs, token) {
		t.Errorf("the token leaked into the logs:\n%s", logs)
	}
}

func hasEvent(events []eventsv1.Event, secret, reason string) bool {
	for _, ev := range events {
		if ev.Regarding.Kind == "Secret" && ev.Regarding.Name == secret && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
			return true
		}
	}
	return false
}

func TestGetUnknownClusterIsNotFound(t *testing.T) {
	p := kubeconfig.New(kubeconfig.Options{})
	if _, err := p.Get(context.Background(), "nope"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get of an unknown cluster: %v, want ErrClusterNotFound", err)
	}
}
