package manager_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/status"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// An attacker's member: its refusals of the controller's lists echo the
// bearer token the controller sent, in every wrapping ("refused for token T
// (header "Bearer T", query token=T)"), and the kubeconfig's server URL
// carries a password and a query token. None of these credentials reaches
// the status endpoint (JSON and text), a line the library logs (at every
// verbosity it logs at), or an Event on the kubeconfig Secret; the refusal
// itself does, redacted. (client-go's own lines at -v 9 and more print
// request URLs and response bodies: docs/advanced/security.md.)
func TestEchoedCredentialsAreRedactedEverywhere(t *testing.T) {
	ctx := context.Background()
	token := "echoed-token-" + randomHex(t)
	password := "url-password-" + randomHex(t)
	queryToken := "query-token-" + randomHex(t)
	member := echoingMember(t, fleet.Config(1), token)

	ns := "echo-" + randomHex(t)[:8]
	host := newHostClient(t)
	if err := host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("https://echo-user:%s@%s/?token=%s", password, member.Listener.Addr(), queryToken)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo", Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
		Data:       map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kubeconfigFor(t, server, member, token)},
	}

	var logMu sync.Mutex
	var logs strings.Builder
	log := funcr.NewJSON(func(obj string) {
		logMu.Lock()
		defer logMu.Unlock()
		logs.WriteString(obj + "\n")
	}, funcr.Options{Verbosity: 10})
	addr := freeAddr(t)
	provider := kubeconfig.New(kubeconfig.Options{Namespace: ns})
	mgr, err := mcmanager.New(fleet.Config(0), provider, mcmanager.Options{
		Metrics:                metricsserver.Options{BindAddress: addr},
		HealthProbeBindAddress: "0",
		Logger:                 log,
	}, mcmanager.WithClusterStartTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	err = mcbuilder.ControllerManagedBy(mgr).Named("echo-configmaps").For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(context.Context, mcreconcile.Request) (mcreconcile.Result, error) {
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	if err := host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	base := "http://" + addr + status.DefaultPath
	secrets := map[string]string{
		"token":                 token,
		"token, query-escaped":  url.QueryEscape(token),
		"URL password":          password,
		"URL query token":       queryToken,
		"Basic of the URL user": base64.StdEncoding.EncodeToString([]byte("echo-user:" + password)),
	}
	leaks := func(what, text string) error {
		for name, s := range secrets {
			if strings.Contains(text, s) {
				i := strings.Index(text, s)
				return fmt.Errorf("%s shows the %s: ...%s...", what, name, text[max(0, i-200):min(len(text), i+len(s)+50)])
			}
		}
		return nil
	}
	// The refusal reaches the status endpoint, the log and an Event, each
	// time redacted.
	const refusal = "refused for token [redacted]"
	fleettest.Eventually(t, 2*time.Minute, func() error {
		code, doc, err := tryGetStatus(base, "", nil)
		if err != nil {
			return err
		}
		_, text, err := tryGetStatus(base, "?format=text", nil)
		if err != nil {
			return err
		}
		logMu.Lock()
		logged := logs.String()
		logMu.Unlock()
		events := &eventsv1.EventList{}
		if err := host.List(ctx, events, client.InNamespace(ns)); err != nil {
			return err
		}
		notes := ""
		for _, e := range events.Items {
			if e.Regarding.Name == secret.Name {
				notes += e.Note + "\n"
			}
		}
		for what, body := range map[string]string{"/clusters": doc, "/clusters?format=text": text, "the log": logged, "the Secret's Events": notes} {
			if err := leaks(what, body); err != nil {
				t.Fatal(err)
			}
		}
		var list status.List
		if err := json.Unmarshal([]byte(doc), &list); err != nil || code != http.StatusOK {
			return fmt.Errorf("/clusters: %d %s", code, doc)
		}
		for what, body := range map[string]string{"/clusters": doc, "/clusters?format=text": text, "the log": logged, "the Secret's Events": notes} {
			if !strings.Contains(body, refusal) {
				return fmt.Errorf("%s does not show the member's refusal %q yet:\n%s\nthe log ends:\n%s", what, refusal, cutText(body), logTail(logged))
			}
		}
		return nil
	})
}

// echoingMember serves the API of the real member behind cfg, to clients
// with the bearer token, but refuses every list and watch of ConfigMaps with
// the token it was sent quoted back in every wrapping.
func echoingMember(t *testing.T, cfg *rest.Config, token string) *httptest.Server {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Del("Authorization") // the member's own credentials go in the transport
		},
		Transport: transport,
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		// Lists and watches alike: client-go lists by a watch first
		// (sendInitialEvents), and falls back to a plain list.
		if strings.HasSuffix(r.URL.Path, "/configmaps") {
			sent := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			w.Header().Set("Content-Type", "application/json")
			// A 401, not a 403: the engine's list probe takes a 403 for RBAC
			// it cannot judge and waits for CacheSyncTimeout, whose error
			// quotes nothing from the member.
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Reason: metav1.StatusReasonUnauthorized, Code: http.StatusUnauthorized,
				Message: fmt.Sprintf("configmaps: refused for token %s (header %q, query token=%s)",
					sent, r.Header.Get("Authorization"), url.QueryEscape(sent)),
			})
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// kubeconfigFor returns a kubeconfig for server, trusting srv's certificate,
// with the bearer token.
func kubeconfigFor(t *testing.T, server string, srv *httptest.Server, token string) []byte {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"echo": {Server: server, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"echo": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"echo": {Cluster: "echo", AuthInfo: "echo"}},
		CurrentContext: "echo",
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func newHostClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(fleet.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// logTail is the end of a log, without the lines of verbosity 5 and more.
func logTail(s string) string {
	var kept []string
	for line := range strings.SplitSeq(s, "\n") {
		if !strings.Contains(line, `"level":5`) && !strings.Contains(line, `"level":6`) {
			kept = append(kept, line)
		}
	}
	return cutText(strings.Join(kept, "\n"))
}

func cutText(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}
