package kubeconfig_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// A Secret whose token is a JWT about to expire gets a Warning Event that
// names the cluster; neither the Event nor the log holds the token.
func TestExpiringTokenIsReportedOnTheSecret(t *testing.T) {
	e := start(t)
	enc := base64.RawURLEncoding.EncodeToString
	// Issued 59 minutes ago for an hour (not signed by the member: the
	// warning reads exp without verifying; the member refuses it).
	now := time.Now()
	token := enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." +
		enc(fmt.Appendf(nil, `{"iat":%d,"exp":%d,"sub":"system:serviceaccount:x:y"}`, now.Add(-59*time.Minute).Unix(), now.Add(time.Minute).Unix())) +
		"." + enc([]byte("not-a-signature"))
	full := fleet.Config(1)
	kc, err := fleettest.KubeconfigFor(&rest.Config{Host: full.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: full.CAData}}, "member-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.host.Create(context.Background(), e.rawSecret("expiring", string(kc))); err != nil {
		t.Fatal(err)
	}
	events := e.waitForEvents(t, map[string]string{"expiring": kubeconfig.ReasonCredentialsExpiring})
	for _, ev := range events {
		if ev.Reason == kubeconfig.ReasonCredentialsExpiring && !strings.Contains(ev.Note, `cluster "expiring"`) {
			t.Errorf("the Event does not name the cluster: %q", ev.Note)
		}
		if strings.Contains(ev.Note, token) {
			t.Errorf("an Event holds the token: %q", ev.Note)
		}
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(e.logs.String(), "bearer token expires soon") {
			return fmt.Errorf("no log line of the expiry")
		}
		return nil
	})
	logs := e.logs.String()
	if strings.Contains(logs, token) || strings.Contains(logs, strings.Split(token, ".")[2]) {
		t.Error("the log holds the token")
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "bearer token expires soon") && !strings.Contains(line, "expiring") {
			t.Errorf("the log line does not name the source or the cluster: %s", line)
		}
	}
}
