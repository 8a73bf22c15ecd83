package testbed

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BoundToken creates the Secret holder in ns and returns an hour-long token
// of the ServiceAccount sa of ns, bound to it: deleting the Secret
// invalidates the token, as a rotation's clean-up does.
func BoundToken(t testing.TB, c client.Client, ns, sa, holder string) string {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: holder}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: holder, UID: s.UID},
	}}
	if err := c.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}, req); err != nil {
		t.Fatal(err)
	}
	return req.Status.Token
}

// ListsServed returns how many LISTs of resource the API server of cfg
// has answered, and watch-lists (client-go's informers list by streaming a
// watch), read from its own metrics.
func ListsServed(t testing.TB, cfg *rest.Config, resource string) float64 {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(cfg).RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		list := strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `verb="LIST"`)
		watchList := strings.HasPrefix(line, "apiserver_watch_list_duration_seconds_count{")
		if (!list && !watchList) || !strings.Contains(line, `resource="`+resource+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		total += v
	}
	return total
}
