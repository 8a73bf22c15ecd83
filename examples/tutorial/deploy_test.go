package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// config/default applied to a real hub runs the tutorial's controller with
// the ServiceAccount's own token, and each rule of its Roles is needed: the
// controller reconciles, records Events and elects itself leader with all of
// them, and logs a "forbidden" error naming the rule's resource without any
// one of them.
func TestDeployedControllerNeedsEveryRuleOfItsRoles(t *testing.T) {
	d := deploy(t, "../../config/default")
	d.checkEveryRule(t, 1, func(ctls []*controller, events []eventsv1.Event) error {
		for _, e := range events {
			if e.Regarding.Kind == "Lease" && e.Regarding.Name == "fleet-controller" {
				return nil
			}
		}
		return fmt.Errorf("no leader election Event on Lease fleet-controller")
	})
}

// config/samples/sharding runs three replicas that share the fleet with the
// same ServiceAccount: the member is reconciled by one of them, and the
// sharding Role's rule is needed.
func TestShardedSampleNeedsEveryRuleOfItsRoles(t *testing.T) {
	d := deploy(t, "../../config/samples/sharding")
	if got, _, _ := unstructured.NestedFieldNoCopy(d.deployment.Object, "spec", "replicas"); fmt.Sprint(got) != "3" {
		t.Fatalf("the sharding sample runs %v replicas, want 3", got)
	}
	d.checkEveryRule(t, 3, func(ctls []*controller, _ []eventsv1.Event) error {
		// A replica that engaged member-1 alone may hand it over when its
		// peers appear: count the replicas whose last lifecycle line for it
		// says engaged.
		owners := 0
		for _, ctl := range ctls {
			if strings.Contains(ctl.last(`"msg":"Cluster `, `"cluster":"member-1"`), `"msg":"Cluster engaged"`) {
				owners++
			}
		}
		if owners != 1 {
			return fmt.Errorf("member-1 engaged by %d of 3 replicas, want 1", owners)
		}
		return nil
	})
}

// deployment is a kustomization applied to the hub, with a member registered
// and the token of its ServiceAccount.
type deployment struct {
	bin, ns, kubeconfig string
	host, member        client.Client
	deployment          *unstructured.Unstructured
	roles               []*rbacv1.Role
	clusterRoles        []*rbacv1.ClusterRole // the metrics server's (metrics_test.go)
	refused             *corev1.Secret
}

// deploy applies the kustomization in dir to the hub (removing it when the
// test ends, but for the Namespace, which envtest cannot delete), registers
// member 1 and a Secret the provider refuses, and mints a token for the
// Deployment's ServiceAccount.
func deploy(t *testing.T, dir string) *deployment {
	d := &deployment{bin: buildTutorial(t), host: newClient(t, fleet.Config(0)), member: newClient(t, fleet.Config(1))}
	ctx := t.Context()
	objs, err := loadKustomization(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		err := d.host.Create(ctx, o.DeepCopy())
		if o.GetKind() == "Namespace" && apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			t.Fatalf("applying %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		if o.GetKind() != "Namespace" {
			t.Cleanup(func() {
				if err := d.host.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
					t.Error(err)
				}
			})
		}
		switch o.GetKind() {
		case "Deployment":
			d.deployment = o
		case "Role":
			r := &rbacv1.Role{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r); err != nil {
				t.Fatal(err)
			}
			d.roles = append(d.roles, r)
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r); err != nil {
				t.Fatal(err)
			}
			d.clusterRoles = append(d.clusterRoles, r)
		}
	}
	if d.deployment == nil || len(d.roles) == 0 {
		t.Fatalf("%s has no Deployment or no Role", dir)
	}
	d.ns = d.deployment.GetNamespace()
	t.Cleanup(func() { d.deleteLeases(t) })

	registerMember(t, d.host, d.ns, "member-1")
	// A labelled Secret the provider cannot use: it records a Warning Event
	// on it, so the Events rule is exercised too.
	d.refused = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.ns, Name: "not-a-kubeconfig", Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
		Data:       map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: []byte("not a kubeconfig")},
	}
	if err := d.host.Create(ctx, d.refused); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	d.kubeconfig = serviceAccountKubeconfig(t, d.host, d.ns, d.deployment)
	return d
}

// deleteLeases removes the Leases of earlier runs (leader election, sharding
// members and fences), or a new process would wait for them to expire.
func (d *deployment) deleteLeases(t *testing.T) {
	leases := &unstructured.UnstructuredList{}
	leases.SetAPIVersion("coordination.k8s.io/v1")
	leases.SetKind("LeaseList")
	if err := d.host.List(context.Background(), leases, client.InNamespace(d.ns)); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if err := d.host.Delete(context.Background(), &l); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// run starts n replicas as the Deployment runs them.
func (d *deployment) run(t *testing.T, n int) []*controller {
	d.deleteLeases(t)
	ctls := make([]*controller, n)
	for i := range ctls {
		ctls[i] = startController(t, d.bin, d.kubeconfig, deploymentArgs(t, d.deployment, "0")...)
	}
	return ctls
}

// checkEveryRule runs n replicas with every rule of the Roles and expects a
// member's ConfigMap reconciled, the refused Secret's Warning Event, no
// forbidden request, and what extra says; then, for each rule in turn, runs
// them without it and expects a forbidden error naming its resource.
func (d *deployment) checkEveryRule(t *testing.T, n int, extra func([]*controller, []eventsv1.Event) error) {
	ctx := t.Context()
	t.Run("every rule", func(t *testing.T) {
		ctls := d.run(t, n)
		name := fmt.Sprintf("deployed-%d", time.Now().UnixNano())
		if err := d.member.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}); err != nil {
			t.Fatal(err)
		}
		fleettest.Eventually(t, time.Minute, func() error {
			reconciled := false
			for _, ctl := range ctls {
				reconciled = reconciled || ctl.has(`"msg":"reconciled ConfigMap"`, `"cluster":"member-1"`, `"name":"`+name+`"`)
			}
			if !reconciled {
				return fmt.Errorf("no reconcile of member-1's default/%s logged:\n%s", name, ctls[0])
			}
			events := &eventsv1.EventList{}
			if err := d.host.List(ctx, events, client.InNamespace(d.ns)); err != nil {
				return err
			}
			refused := false
			for _, e := range events.Items {
				refused = refused || e.Regarding.Name == d.refused.Name && e.Type == corev1.EventTypeWarning
			}
			if !refused {
				return fmt.Errorf("no Warning Event on Secret %s", d.refused.Name)
			}
			return extra(ctls, events.Items)
		})
		for _, ctl := range ctls {
			if line := ctl.line("forbidden"); line != "" {
				t.Fatalf("with every rule the controller was refused a request:\n%s", line)
			}
		}
	})

	for _, role := range d.roles {
		for i, rule := range role.Rules {
			t.Run(fmt.Sprintf("without %s rule %d %v %v", role.Name, i, rule.APIGroups, rule.Resources), func(t *testing.T) {
				reduced := role.DeepCopy()
				reduced.Rules = append(reduced.Rules[:i:i], role.Rules[i+1:]...)
				setRules(t.Context(), t, d.host, reduced)
				t.Cleanup(func() { setRules(context.Background(), t, d.host, role) })

				ctls := d.run(t, n)
				// The API server's words for a refused request on this rule's resource.
				want := fmt.Sprintf(`resource "%s" in API group "%s"`, rule.Resources[0], rule.APIGroups[0])
				fleettest.Eventually(t, time.Minute, func() error {
					for _, ctl := range ctls {
						if ctl.line("forbidden", want) != "" {
							return nil
						}
					}
					return fmt.Errorf("no forbidden error naming %s logged:\n%s", want, ctls[0])
				})
			})
		}
	}
}

// setRules updates the Role on the hub to have role's rules.
func setRules(ctx context.Context, t *testing.T, host client.Client, role *rbacv1.Role) {
	t.Helper()
	live := &rbacv1.Role{}
	if err := host.Get(ctx, client.ObjectKeyFromObject(role), live); err != nil {
		t.Fatal(err)
	}
	live.Rules = role.Rules
	if err := host.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
}

// serviceAccountKubeconfig mints a token for the Deployment's ServiceAccount
// (TokenRequest, as the kubelet does for the pod) and writes a kubeconfig
// that authenticates with it alone.
func serviceAccountKubeconfig(t *testing.T, host client.Client, ns string, deployment *unstructured.Unstructured) string {
	t.Helper()
	name, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName")
	sa := &corev1.ServiceAccount{}
	if err := host.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, sa); err != nil {
		t.Fatalf("the Deployment's ServiceAccount %q: %v", name, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := host.SubResource("token").Create(t.Context(), sa, tr); err != nil {
		t.Fatal(err)
	}
	admin := fleet.Config(0)
	cfg := &rest.Config{Host: admin.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}}
	return writeKubeconfig(t, cfg)
}

// deploymentArgs returns the manager container's arguments, with the pod's
// environment expanded and the ports moved off fixed numbers: the metrics
// server's to metricsAddr ("0": none).
func deploymentArgs(t *testing.T, deployment *unstructured.Unstructured, metricsAddr string) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("want one container in the Deployment, got %d", len(containers))
	}
	raw, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	var args []string
	for _, a := range raw {
		a = strings.ReplaceAll(a, "$(POD_NAMESPACE)", deployment.GetNamespace())
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + metricsAddr
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + freeAddr(t)
		}
		args = append(args, a)
	}
	return args
}
