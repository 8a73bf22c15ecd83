package clusters_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
)

// watchCompressed opens a watch of the ConfigMaps of ns through the HTTP
// client of a cluster built with opts, as informers open theirs (a streaming
// list: the initial objects come as events, and the API server compresses
// such streams), reads its first event and reports
// whether the API server sent it compressed (the transport then decompressed
// it transparently, and says so in Response.Uncompressed).
func watchCompressed(t *testing.T, ns string, opts ...cluster.Option) bool {
	t.Helper()
	cl, err := clusters.NewCluster(fleet.Config(0), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := strings.TrimSuffix(fleet.Config(0).Host, "/") + "/api/v1/namespaces/" + ns + "/configmaps?watch=true&timeoutSeconds=30&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.GetHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %s", resp.Status)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the watch's first event: %v", err)
	}
	if !strings.Contains(line, `"ADDED"`) {
		t.Fatalf("the watch's first event is not the ConfigMap's: %.200s", line)
	}
	return resp.Uncompressed
}

// The API server compresses watch streams for clients that accept gzip, and
// every open watch then holds a gzip reader: members built by NewCluster do
// not ask, unless told to.
func TestMembersAskForUncompressedWatches(t *testing.T) {
	c := testbed.NewClient(t, fleet.Config(0))
	ns := testbed.Name("compression")
	testbed.CreateNamespace(t, c, ns)
	if err := c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	if watchCompressed(t, ns) {
		t.Error("a member built with NewCluster's defaults received a compressed watch")
	}
	if !watchCompressed(t, ns, clusters.WithResponseCompression()) {
		t.Error("a member built WithResponseCompression received an uncompressed watch")
	}
}

// For a config that needs no transport of its own (plain HTTP, no TLS
// options), client-go hands out http.DefaultTransport and ignores
// DisableCompression: NewCluster's members still ask for no compression.
func TestPlainHTTPMembersAskForNoCompression(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
	}))
	defer srv.Close()
	get := func(opts ...cluster.Option) string {
		t.Helper()
		cl, err := clusters.NewCluster(&rest.Config{Host: srv.URL}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cl.GetHTTPClient().Get(srv.URL + "/api")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}
	if enc := get(); enc != "" {
		t.Errorf("a plain-HTTP member built with NewCluster's defaults asked for %q", enc)
	}
	if enc := get(clusters.WithResponseCompression()); enc != "gzip" {
		t.Errorf("a plain-HTTP member built WithResponseCompression asked for %q, want gzip", enc)
	}
}
