package builder_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mccontext "github.com/mcruntime/multicluster-runtime/pkg/context"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
)

const clusterAnnotation = "test.mcruntime.io/cluster"

// clusterDefaulter annotates ConfigMaps with the cluster the admission
// request came from.
type clusterDefaulter struct{}

func (clusterDefaulter) Default(ctx context.Context, cm *corev1.ConfigMap) error {
	name, ok := mccontext.ClusterFrom(ctx)
	if !ok {
		return fmt.Errorf("no cluster in the context")
	}
	if name == "" {
		name = "host"
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[clusterAnnotation] = name
	return nil
}

// rejectingValidator refuses ConfigMaps with a "reject" key, naming the cluster.
type rejectingValidator struct{}

func (rejectingValidator) ValidateCreate(ctx context.Context, cm *corev1.ConfigMap) (admission.Warnings, error) {
	if _, bad := cm.Data["reject"]; bad {
		name, _ := mccontext.ClusterFrom(ctx)
		return nil, fmt.Errorf("rejected in cluster %q", name)
	}
	return nil, nil
}

func (rejectingValidator) ValidateUpdate(context.Context, *corev1.ConfigMap, *corev1.ConfigMap) (admission.Warnings, error) {
	return nil, nil
}

func (rejectingValidator) ValidateDelete(context.Context, *corev1.ConfigMap) (admission.Warnings, error) {
	return nil, nil
}

// A member's API server calls the host's webhook server at the member's
// path, the host's API server at the plain path: the handlers see the
// cluster each request came from.
func TestWebhooksServeMembersThroughTheirPath(t *testing.T) {
	e := newEnv(t)
	certDir, caPEM := selfSignedCert(t)
	port := freePort(t)
	server := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	mgr, err := mcmanager.New(fleet.Config(0), e.provider, mcmanager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          server,
	})
	must(t, err)
	must(t, mcbuilder.WebhookManagedBy(mgr, &corev1.ConfigMap{}).
		WithDefaulter(clusterDefaulter{}).
		WithValidator(rejectingValidator{}).
		Complete())
	fleettest.RunManager(t, mgr)
	e.engage(1)
	fleettest.Eventually(t, 0, func() error { return server.StartedChecker()(nil) })

	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	installWebhooks(t, e.members[0], e.ns, base+mcbuilder.WebhookClusterPath("member-1", "/mutate--v1-configmap"), base+mcbuilder.WebhookClusterPath("member-1", "/validate--v1-configmap"), caPEM)
	installWebhooks(t, e.host, e.ns, base+"/mutate--v1-configmap", base+"/validate--v1-configmap", caPEM)

	for _, tc := range []struct {
		c    client.Client
		want string
	}{{e.members[0], member(1)}, {e.host, "host"}} {
		// API servers pick up new webhook configurations asynchronously.
		var i int
		fleettest.Eventually(t, 0, func() error {
			i++
			cm := testbed.CreateConfigMap(t, tc.c, e.ns, fmt.Sprintf("defaulted-%d", i), nil)
			if got := cm.Annotations[clusterAnnotation]; got != tc.want {
				return fmt.Errorf("created ConfigMap has cluster annotation %q, want %q", got, tc.want)
			}
			return nil
		})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "rejected"}, Data: map[string]string{"reject": ""}}
		err := tc.c.Create(context.Background(), cm)
		wantName := tc.want
		if wantName == "host" {
			wantName = ""
		}
		if want := fmt.Sprintf("rejected in cluster %q", wantName); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("creating a rejected ConfigMap: error = %v, want one containing %q", err, want)
		}
	}
}

// installWebhooks registers the mutating and validating webhooks with the API
// server of c, for the test's namespace only (the fleet is shared).
func installWebhooks(t *testing.T, c client.Client, ns, mutateURL, validateURL string, ca []byte) {
	t.Helper()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.test.mcruntime.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &mutateURL, CABundle: ca},
			Rules: rules, FailurePolicy: &fail, SideEffects: &none, NamespaceSelector: selector, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.test.mcruntime.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &validateURL, CABundle: ca},
			Rules: rules, FailurePolicy: &fail, SideEffects: &none, NamespaceSelector: selector, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	for _, obj := range []client.Object{mutating, validating} {
		must(t, c.Create(context.Background(), obj))
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
}

// selfSignedCert writes a serving certificate for 127.0.0.1 to a directory
// and returns it with the certificate in PEM, the CA bundle.
func selfSignedCert(t *testing.T) (string, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "webhook-test"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	dir := t.TempDir()
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	must(t, os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return dir, certPEM
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
