package kubeconfig_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// rawSecret is a labelled Secret holding kubeconfig as it is.
func (e *env) rawSecret(name, kubeconfigYAML string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: e.ns, Name: name,
			Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"},
		},
		Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: []byte(kubeconfigYAML)},
	}
}

// waitForEvents waits until every Secret in want has a Warning Event with
// the given reason, and returns all Events of the namespace.
func (e *env) waitForEvents(t *testing.T, want map[string]string) []eventsv1.Event {
	t.Helper()
	var events eventsv1.EventList
	fleettest.Eventually(t, 2*time.Minute, func() error {
		if err := e.host.List(context.Background(), &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		for name, reason := range want {
			if !hasEvent(events.Items, name, reason) {
				var have []string
				for _, ev := range events.Items {
					have = append(have, ev.Regarding.Name+":"+ev.Reason)
				}
				return fmt.Errorf("no %s Event on %s; have %v", reason, name, have)
			}
		}
		return nil
	})
	return events.Items
}

// execPlugin writes a script that records each run in a marker file and
// prints an ExecCredential with member m's client certificate.
func execPlugin(t *testing.T, m int) (command, marker string) {
	t.Helper()
	dir := t.TempDir()
	cfg := fleet.Config(m)
	cred, err := json.Marshal(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1",
		"kind":       "ExecCredential",
		"status":     map[string]string{"clientCertificateData": string(cfg.CertData), "clientKeyData": string(cfg.KeyData)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cred.json"), cred, 0o600); err != nil {
		t.Fatal(err)
	}
	marker = filepath.Join(dir, "ran")
	command = filepath.Join(dir, "plugin.sh")
	script := fmt.Sprintf("#!/bin/sh\necho run >> %q\ncat %q\n", marker, filepath.Join(dir, "cred.json"))
	if err := os.WriteFile(command, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return command, marker
}

func execKubeconfig(t *testing.T, m int, command string) string {
	t.Helper()
	cfg := fleet.Config(m)
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: %q, interactiveMode: Never}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, cfg.Host, base64.StdEncoding.EncodeToString(cfg.CAData), command)
}

// Whoever can write a labelled Secret must not make the controller run a
// command or send a local file to a server of their choice.
func TestSecretsCannotRunCommandsOrReadLocalFiles(t *testing.T) {
	e := start(t)
	ctx := context.Background()

	command, marker := execPlugin(t, 1)

	// A server of the writer's choice, recording what it is sent.
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	const stolen = "controller-serviceaccount-token-content"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(stolen), 0o600); err != nil {
		t.Fatal(err)
	}
	fileKubeconfig := func(user string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: %s}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, srv.URL, user)
	}
	for _, s := range []*corev1.Secret{
		e.rawSecret("exec", execKubeconfig(t, 1, command)),
		e.rawSecret("token-file", fileKubeconfig(fmt.Sprintf("{tokenFile: %q}", tokenFile))),
		e.rawSecret("cert-files", fileKubeconfig(fmt.Sprintf("{client-certificate: %q, client-key: %q}", tokenFile, tokenFile))),
		e.rawSecret("auth-provider", fileKubeconfig("{auth-provider: {name: oidc, config: {client-id: x}}}")),
		e.secret(t, "good", 2),
	} {
		if err := e.host.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	events := e.waitForEvents(t, map[string]string{
		"exec":          kubeconfig.ReasonKubeconfigRefused,
		"token-file":    kubeconfig.ReasonKubeconfigRefused,
		"cert-files":    kubeconfig.ReasonKubeconfigRefused,
		"auth-provider": kubeconfig.ReasonKubeconfigRefused,
	})
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"good": 2})

	if _, err := os.Stat(marker); err == nil {
		t.Error("the exec plugin named by a Secret was run")
	}
	mu.Lock()
	for _, auth := range seen {
		if strings.Contains(auth, stolen) {
			t.Errorf("the content of a local file was sent to the Secret's server: %q", auth)
		}
	}
	mu.Unlock()
	for _, ev := range events {
		if ev.Reason == kubeconfig.ReasonKubeconfigRefused && !strings.Contains(ev.Note, "refused") {
			t.Errorf("Event on %s does not say why: %s", ev.Regarding.Name, ev.Note)
		}
		if ev.ReportingController != kubeconfig.ControllerName {
			t.Errorf("Event reported by %q, want %q", ev.ReportingController, kubeconfig.ControllerName)
		}
	}
	logs := e.logs.String()
	for _, name := range []string{"exec", "token-file", "cert-files", "auth-provider"} {
		if !strings.Contains(logs, `"`+name+`"`) {
			t.Errorf("no log line names the refused Secret %s", name)
		}
	}
}

// An installation that needs an exec plugin allows its command by name.
func TestAllowedExecCommandsRun(t *testing.T) {
	command, marker := execPlugin(t, 1)
	e := startWith(t, nil, kubeconfig.Options{
		KubeconfigPolicy: clusters.KubeconfigPolicy{AllowedExecCommands: []string{command}},
		ControllerName:   "fleet-secrets",
	})
	if err := e.host.Create(context.Background(), e.rawSecret("exec", execKubeconfig(t, 1, command))); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"exec": 1})
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the allowed exec plugin did not run: %v", err)
	}
	var list eventsv1.EventList
	fleettest.Eventually(t, time.Minute, func() error { // the Engaged Event, reported under the configured name
		if err := e.host.List(context.Background(), &list, client.InNamespace(e.ns)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == kubeconfig.ReasonEngaged && ev.ReportingController == "fleet-secrets" {
				return nil
			}
		}
		return fmt.Errorf("no Engaged Event reported by fleet-secrets in %d Events", len(list.Items))
	})
}

// Secrets written for the upstream design, labelled
// sigs.k8s.io/multicluster-runtime-kubeconfig=true, are read by default.
func TestUpstreamLabelIsReadByDefault(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	up := e.secret(t, "upstream", 1)
	up.Labels = map[string]string{kubeconfig.UpstreamKubeconfigSecretLabel: "true"}
	both := e.secret(t, "both", 2)
	both.Labels[kubeconfig.UpstreamKubeconfigSecretLabel] = "true"
	for _, s := range []*corev1.Secret{up, both, e.secret(t, "ours", 0)} {
		if err := e.host.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"upstream": 1, "both": 2, "ours": 0})

	// Removing one of two labels keeps the cluster; removing the last one
	// disengages it.
	if err := e.host.Get(ctx, client.ObjectKeyFromObject(both), both); err != nil {
		t.Fatal(err)
	}
	delete(both.Labels, kubeconfig.DefaultKubeconfigSecretLabel)
	if err := e.host.Update(ctx, both); err != nil {
		t.Fatal(err)
	}
	if err := e.host.Get(ctx, client.ObjectKeyFromObject(up), up); err != nil {
		t.Fatal(err)
	}
	up.Labels = nil
	if err := e.host.Update(ctx, up); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"both": 2, "ours": 0})
}

// Secrets planted in every field of a kubeconfig reach no log line and no
// Event, whichever way the kubeconfig fails.
func TestNoCredentialReachesLogsOrEvents(t *testing.T) {
	// proxy-url is allowed so that the kubeconfigs go as far as they can.
	e := startWith(t, nil, kubeconfig.Options{KubeconfigPolicy: clusters.KubeconfigPolicy{AllowProxyURL: true}})
	ctx := context.Background()
	planted := map[string]string{
		"url-password": "pl4nted-url-password",
		"url-query":    "pl4nted-query-token",
		"token":        "pl4nted-bearer-token",
		"password":     "pl4nted-basic-password",
		"exec-arg":     "pl4nted-exec-argument",
		"exec-env":     "pl4nted-exec-env-value",
		"cert-data":    "pl4ntedcertdata",
		"key-data":     "pl4ntedkeydata",
		"auth-config":  "pl4nted-auth-provider-secret",
		"proxy":        "pl4nted-proxy-password",
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	kc := func(server, user string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, proxy-url: "http://proxyuser:%s@127.0.0.1:1"}}]
users: [{name: u, user: %s}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server, planted["proxy"], user)
	}
	server := fmt.Sprintf("https://admin:%s@127.0.0.1:1/?token=%s", planted["url-password"], planted["url-query"])
	secrets := map[string]string{
		// Unreachable, with credentials in every field a Secret may use.
		"unreachable": kc(server, fmt.Sprintf("{token: %s}", planted["token"])),
		"basic-auth":  kc(server, fmt.Sprintf("{username: admin, password: %s}", planted["password"])),
		"bad-certs":   kc(server, fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}", b64(planted["cert-data"]), b64(planted["key-data"]))),
		// Refused, with credentials in the refused fields.
		"exec": kc(server, fmt.Sprintf("{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true, args: [--token=%s], env: [{name: TOKEN, value: %s}]}}",
			planted["exec-arg"], planted["exec-env"])),
		"auth-provider": kc(server, fmt.Sprintf("{auth-provider: {name: oidc, config: {client-secret: %s}}}", planted["auth-config"])),
		// Malformed, quoting a credential where the parser chokes.
		"malformed": kc(server, fmt.Sprintf("{token: [%s]}", planted["token"])),
	}
	for name, data := range secrets {
		if err := e.host.Create(ctx, e.rawSecret(name, data)); err != nil {
			t.Fatal(err)
		}
	}
	events := e.waitForEvents(t, map[string]string{
		"unreachable":   kubeconfig.ReasonEngageFailed,
		"basic-auth":    kubeconfig.ReasonEngageFailed,
		"bad-certs":     kubeconfig.ReasonEngageFailed,
		"exec":          kubeconfig.ReasonKubeconfigRefused,
		"auth-provider": kubeconfig.ReasonKubeconfigRefused,
		"malformed":     kubeconfig.ReasonInvalidKubeconfig,
	})
	var captured strings.Builder
	captured.WriteString(e.logs.String())
	for _, ev := range events {
		fmt.Fprintln(&captured, ev.Reason, ev.Note)
	}
	all := captured.String()
	for field, secret := range planted {
		if strings.Contains(all, secret) {
			t.Errorf("the %s credential reached the logs or Events", field)
		}
		if strings.Contains(all, b64(secret)) {
			t.Errorf("the %s credential reached the logs or Events base64-encoded", field)
		}
	}
	if t.Failed() {
		t.Logf("captured:\n%s", all)
	}
	// A server URL is still printed, without its credentials.
	if !strings.Contains(all, "127.0.0.1:1") {
		t.Errorf("the unreachable server is not named:\n%s", all)
	}
}
