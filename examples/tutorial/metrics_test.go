package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// config/default serves /metrics and /clusters over HTTPS to the readers the
// hub's API server authenticates and authorizes, and to no one else: a request
// without a token is refused (401), so is one with a forged token (500: the
// API server's TokenReview answers it with an error) and one of a
// ServiceAccount without the metrics-reader ClusterRole (403); the token of a
// ServiceAccount bound to that role (what
// the ServiceMonitor scrapes with) reads both. Plain HTTP gets no metrics.
// Each rule of the metrics server's own ClusterRole (TokenReview,
// SubjectAccessReview) is needed: without it, even the reader is refused.
func TestDeployedMetricsAreReadByTheReaderRoleOnly(t *testing.T) {
	d := deploy(t, "../../config/default")
	auth, reader := d.clusterRole(t, "tokenreviews"), d.clusterRole(t, "/clusters")
	readerToken := d.serviceAccountToken(t, "metrics-reader-sa", reader.Name)
	otherToken := d.serviceAccountToken(t, "not-a-metrics-reader-sa", "")

	addr := freeAddr(t)
	base := "https://" + addr
	ctl := startController(t, d.bin, d.kubeconfig, deploymentArgs(t, d.deployment, addr)...)
	// The status endpoint lists member-1 engaged once the fleet is up.
	fleettest.Eventually(t, time.Minute, func() error {
		code, body, err := get(base+"/clusters", readerToken)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, ctl)
		}
		if code != http.StatusOK || !strings.Contains(body, `"name":"member-1"`) || !strings.Contains(body, `"state":"engaged"`) {
			return fmt.Errorf("the reader's GET /clusters: %d %s\n%s", code, body, ctl)
		}
		return nil
	})

	for _, c := range []struct {
		who, token string
		want       int
		body       string
	}{
		{"anonymous", "", http.StatusUnauthorized, "Unauthorized"},
		// The API server answers a forged token's TokenReview with an error,
		// which the filter turns into a 500: refused all the same.
		{"a forged token", "not-a-token", http.StatusInternalServerError, "Authentication failed"},
		{"a ServiceAccount without the metrics-reader role", otherToken, http.StatusForbidden, "Authorization denied for user system:serviceaccount:" + d.ns + ":not-a-metrics-reader-sa"},
		{"the metrics reader", readerToken, http.StatusOK, ""},
	} {
		for path, content := range map[string]string{"/metrics": "multicluster_clusters{", "/clusters": `"name":"member-1"`} {
			code, body, err := get(base+path, c.token)
			if err != nil {
				t.Fatalf("%s, GET %s: %v", c.who, path, err)
			}
			if code != c.want || !strings.Contains(body, c.body) {
				t.Errorf("%s, GET %s: %d %q, want %d %q", c.who, path, code, cut(body), c.want, c.body)
			}
			if served := strings.Contains(body, content); served != (c.want == http.StatusOK) {
				t.Errorf("%s, GET %s: served the content: %v, want %v:\n%s", c.who, path, served, !served, cut(body))
			}
		}
	}
	// In clear, the port answers as an HTTPS server does to an HTTP request.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "multicluster_") {
		t.Errorf("plain HTTP GET /metrics: %s %q, want 400 and no metrics", resp.Status, cut(string(body)))
	}

	// The documented way out, never the default: --metrics-secure=false
	// serves both paths in clear to anyone.
	t.Run("plain HTTP by --metrics-secure=false", func(t *testing.T) {
		addr := freeAddr(t)
		ctl := startController(t, d.bin, d.kubeconfig, append(deploymentArgs(t, d.deployment, addr), "--metrics-secure=false")...)
		fleettest.Eventually(t, time.Minute, func() error {
			for path, content := range map[string]string{"/metrics": "multicluster_clusters{", "/clusters": `"name":"member-1"`} {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					return fmt.Errorf("%w\n%s", err, ctl)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), content) {
					return fmt.Errorf("anonymous plain HTTP GET %s: %s %q", path, resp.Status, cut(string(body)))
				}
			}
			return nil
		})
	})

	for i, rule := range auth.Rules {
		t.Run(fmt.Sprintf("without %s rule %d %v", auth.Name, i, rule.Resources), func(t *testing.T) {
			reduced := auth.DeepCopy()
			reduced.Rules = slices.Delete(slices.Clone(auth.Rules), i, i+1)
			setClusterRoleRules(t.Context(), t, d.host, reduced)
			t.Cleanup(func() { setClusterRoleRules(context.Background(), t, d.host, auth) })

			// A new process: the filter caches the reviews of the last one.
			addr := freeAddr(t)
			ctl := startController(t, d.bin, d.kubeconfig, deploymentArgs(t, d.deployment, addr)...)
			want := fmt.Sprintf(`resource "%s" in API group "%s"`, rule.Resources[0], rule.APIGroups[0])
			fleettest.Eventually(t, time.Minute, func() error {
				code, body, err := get("https://"+addr+"/metrics", readerToken)
				if err != nil {
					return err
				}
				if code != http.StatusInternalServerError || strings.Contains(body, "multicluster_") {
					return fmt.Errorf("the reader's GET /metrics: %d %q, want 500 and no metrics", code, cut(body))
				}
				if ctl.line("forbidden", want) == "" {
					return fmt.Errorf("no forbidden error naming %s logged:\n%s", want, ctl)
				}
				return nil
			})
		})
	}
}

// The ServiceMonitor of config/prometheus scrapes the Service of
// config/default as its port serves: over HTTPS, on the named port that leads
// to the container's metrics port, with the bearer token of Prometheus' own
// ServiceAccount.
func TestServiceMonitorScrapesTheMetricsService(t *testing.T) {
	monitors, err := loadKustomization("../../config/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	deployed, err := loadKustomization("../../config/default")
	if err != nil {
		t.Fatal(err)
	}
	var monitor, service, deployment *unstructured.Unstructured
	for _, o := range append(monitors, deployed...) {
		switch o.GetKind() {
		case "ServiceMonitor":
			monitor = o
		case "Service":
			service = o
		case "Deployment":
			deployment = o
		}
	}
	if monitor == nil || service == nil || deployment == nil {
		t.Fatal("want a ServiceMonitor in config/prometheus, a Service and a Deployment in config/default")
	}
	selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if service.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s; Service %s has labels %v", k, v, service.GetName(), service.GetLabels())
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("want one endpoint in the ServiceMonitor, got %d", len(endpoints))
	}
	ep := endpoints[0].(map[string]any)
	if ep["scheme"] != "https" || ep["path"] != "/metrics" || ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("the ServiceMonitor's endpoint: %v, want scheme https, path /metrics and the ServiceAccount's token", ep)
	}
	ports, _, _ := unstructured.NestedSlice(service.Object, "spec", "ports")
	var target any
	for _, p := range ports {
		if p := p.(map[string]any); p["name"] == ep["port"] {
			target = p["targetPort"]
		}
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	containerPorts, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "ports")
	var containerPort any
	for _, p := range containerPorts {
		if p := p.(map[string]any); p["name"] == target {
			containerPort = p["containerPort"]
		}
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if containerPort == nil || !slices.Contains(args, fmt.Sprintf("--metrics-bind-address=:%v", containerPort)) {
		t.Errorf("the ServiceMonitor's port %v leads to target port %v, container port %v; the manager's arguments are %v", ep["port"], target, containerPort, args)
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--metrics-secure") {
			t.Errorf("the Deployment sets %s: metrics are served securely by default", a)
		}
	}
}

// clusterRole returns the deployed ClusterRole with a rule on what.
func (d *deployment) clusterRole(t *testing.T, what string) *rbacv1.ClusterRole {
	t.Helper()
	for _, r := range d.clusterRoles {
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, what) || slices.Contains(rule.NonResourceURLs, what) {
				return r
			}
		}
	}
	t.Fatalf("no ClusterRole of the deployment has a rule on %s", what)
	return nil
}

// serviceAccountToken creates a ServiceAccount in the deployment's namespace,
// binds it to clusterRole (if not ""), and mints a token for it.
func (d *deployment) serviceAccountToken(t *testing.T, name, clusterRole string) string {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: d.ns, Name: name}}
	if err := d.host.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: d.ns, Name: name}},
		}
		if err := d.host.Create(ctx, binding); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := d.host.Delete(context.Background(), binding); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		})
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := d.host.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// setClusterRoleRules updates the ClusterRole on the hub to have role's rules.
func setClusterRoleRules(ctx context.Context, t *testing.T, host client.Client, role *rbacv1.ClusterRole) {
	t.Helper()
	live := &rbacv1.ClusterRole{}
	if err := host.Get(ctx, client.ObjectKeyFromObject(role), live); err != nil {
		t.Fatal(err)
	}
	live.Rules = role.Rules
	if err := host.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
}

// insecure accepts the controller's self-signed certificate, as the
// ServiceMonitor does (insecureSkipVerify).
var insecure = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the test's own self-signed server
}

// get sends GET url with the bearer token (none if ""), and returns the
// status code and body.
func get(url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecure.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// cut shortens a response body for a message.
func cut(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
