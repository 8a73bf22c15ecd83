package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/status"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// freeAddr returns a loopback address with a port free a moment ago, for a
// server whose listener the test cannot ask for its port.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// getStatus GETs the status endpoint at base with query, and returns the
// status code and body.
func getStatus(t *testing.T, base, query string, header http.Header) (int, string) {
	t.Helper()
	code, body, err := tryGetStatus(base, query, header)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

func tryGetStatus(base, query string, header http.Header) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, base+query, nil)
	if err != nil {
		return 0, "", err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", query, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func body(doc status.List) string {
	b, _ := json.MarshalIndent(doc, "", "  ")
	return string(b)
}

func decodeStatus(t *testing.T, body string) status.List {
	t.Helper()
	var doc status.List
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	return doc
}

// The status endpoint, served by the manager on its metrics listener: a
// fleet of five clusters on real control planes, one paused and one cut off
// its clients (disconnected), listed in JSON and in text, page by page, and
// bad queries answered 400.
func TestStatusEndpoint(t *testing.T) {
	ctx := context.Background()
	addr := freeAddr(t)
	p := clustersprovider.New()
	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{
		Metrics:                metricsserver.Options{BindAddress: addr},
		HealthProbeBindAddress: "0",
	}, mcmanager.WithHealthChecks(mcmanager.HealthOptions{
		Interval: 200 * time.Millisecond, Timeout: time.Second, FailureThreshold: 2,
	}))
	if err != nil {
		t.Fatal(err)
	}
	downCfg, proxy := testbed.Proxied(t, fleet.Config(1))
	clusters := map[string]int{"a-up": 1, "b-paused": 2, "c-down": -1, "d-up": 2, "e-up": 1}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range clusters {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		cfg := downCfg
		if i := clusters[name]; i >= 0 {
			cfg = fleet.Config(i)
		}
		cl := testbed.NewCluster(t, cfg)
		if err := p.Add(ctx, name, cl); err != nil {
			t.Fatal(err)
		}
	}
	mgr.(mcmanager.ClusterPauser).PauseCluster("b-paused")
	fleettest.RunManager(t, mgr)
	base := "http://" + addr + status.DefaultPath

	// Every cluster engaged and probed, then c-down cut off.
	fleettest.Eventually(t, time.Minute, func() error {
		code, body, err := tryGetStatus(base, "", nil)
		if err != nil {
			return err // the manager's metrics server is starting
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d: %s", code, body)
		}
		doc := decodeStatus(t, body)
		for _, c := range doc.Clusters {
			if c.State != "engaged" || c.LastProbe == nil {
				return fmt.Errorf("%s is %s, probed: %v", c.Name, c.State, c.LastProbe != nil)
			}
		}
		if len(doc.Clusters) != len(names) {
			return fmt.Errorf("%d clusters listed, want %d", len(doc.Clusters), len(names))
		}
		return nil
	})
	cutAt := time.Now()
	proxy.Cut()
	var doc status.List
	fleettest.Eventually(t, time.Minute, func() error {
		_, body := getStatus(t, base, "?state=disconnected", nil)
		doc = decodeStatus(t, body)
		if len(doc.Clusters) != 1 || doc.Total != 1 {
			return fmt.Errorf("disconnected: %+v", doc)
		}
		return nil
	})
	down := doc.Clusters[0]
	t.Logf("GET %s?state=disconnected: %s", status.DefaultPath, body(doc))
	switch {
	case down.Name != "c-down":
		t.Errorf("the disconnected cluster is %q, want c-down", down.Name)
	case down.Since == nil || down.Since.Before(cutAt):
		t.Errorf("c-down disconnected since %v, before it was cut off (%v)", down.Since, cutAt)
	case down.LastError == "" || down.LastErrorTime == nil || !strings.Contains(down.LastError, "/readyz"):
		t.Errorf("c-down's last error is %q at %v, want the failed /readyz probe", down.LastError, down.LastErrorTime)
	case down.LastProbe == nil || down.LastProbe.Result != "failed":
		t.Errorf("c-down's last probe is %+v, want failed", down.LastProbe)
	case !down.OwnedHere || down.Paused:
		t.Errorf("c-down: owned here %t, paused %t; want true, false", down.OwnedHere, down.Paused)
	}

	// The whole list: every field of the others.
	_, body := getStatus(t, base, "", nil)
	doc = decodeStatus(t, body)
	if doc.Kind != "ClusterStatusList" || doc.Total != len(names) || doc.Continue != "" {
		t.Errorf("document: kind %q, total %d, continue %q; want ClusterStatusList, %d, none", doc.Kind, doc.Total, doc.Continue, len(names))
	}
	for i, c := range doc.Clusters {
		if c.Name != names[i] {
			t.Errorf("cluster %d is %q, want %q (sorted by name)", i, c.Name, names[i])
		}
		if c.Name == "c-down" {
			continue
		}
		switch {
		case c.State != "engaged" || c.Since == nil || !c.OwnedHere || c.Owner != "":
			t.Errorf("%s: %+v; want engaged since a time, owned here, no sharding owner", c.Name, c)
		case c.Paused != (c.Name == "b-paused"):
			t.Errorf("%s: paused %t", c.Name, c.Paused)
		case c.LastProbe == nil || c.LastProbe.Result != "ok" || c.LastProbe.LatencySeconds <= 0 || c.LastProbe.LatencySeconds > 5:
			// Answered within its 1s timeout, give or take a loaded machine's scheduling.
			t.Errorf("%s: last probe %+v, want ok, with a latency of a few milliseconds", c.Name, c.LastProbe)
		case c.LastError != "":
			t.Errorf("%s: last error %q, want none", c.Name, c.LastError)
		}
	}

	// Page by page: each cluster exactly once, in order.
	var walked []string
	next, pages := "", 0
	for {
		q := url.Values{"limit": {"2"}}
		if next != "" {
			q.Set("continue", next)
		}
		code, body := getStatus(t, base, "?"+q.Encode(), nil)
		if code != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, code, body)
		}
		page := decodeStatus(t, body)
		pages++
		if len(page.Clusters) > 2 || page.Total != len(names) {
			t.Fatalf("page %d: %d clusters of %d, want at most 2 of %d", pages, len(page.Clusters), page.Total, len(names))
		}
		for _, c := range page.Clusters {
			walked = append(walked, c.Name)
		}
		if page.Continue == "" {
			break
		}
		next = page.Continue
	}
	if !slices.Equal(walked, names) || pages != 3 {
		t.Errorf("walked %v in %d pages, want %v in 3", walked, pages, names)
	}

	// The text form: a header, one aligned line per cluster, a count.
	for _, how := range []struct {
		query  string
		header http.Header
	}{{"?format=text", nil}, {"", http.Header{"Accept": {"text/plain"}}}} {
		code, text := getStatus(t, base, how.query, how.header)
		t.Logf("GET %s%s %v:\n%s", status.DefaultPath, how.query, how.header, text)
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if code != http.StatusOK || len(lines) != len(names)+2 {
			t.Fatalf("text form (%s %v): %d\n%s", how.query, how.header, code, text)
		}
		header := lines[0]
		if !strings.HasPrefix(header, "NAME ") || !strings.Contains(header, "LAST ERROR") {
			t.Errorf("text header: %q", header)
		}
		col := strings.Index(header, "STATE")
		for i, name := range names {
			line := lines[i+1]
			f := strings.Fields(line)
			wantState, wantPaused := "engaged", name == "b-paused"
			if name == "c-down" {
				wantState = "disconnected"
			}
			if f[0] != name || line[col:col+len(wantState)] != wantState || f[3] != fmt.Sprint(wantPaused) || f[4] != "here" {
				t.Errorf("text line for %s: %q", name, line)
			}
		}
		if want := fmt.Sprintf("# %d of %d clusters", len(names), len(names)); lines[len(lines)-1] != want {
			t.Errorf("text footer %q, want %q", lines[len(lines)-1], want)
		}
	}
	_, text := getStatus(t, base, "?format=text&limit=2&state=engaged", nil)
	if !strings.Contains(text, "# 2 of 4 clusters; next page: ?continue=b-paused&format=text&limit=2&state=engaged\n") {
		t.Errorf("text form's footer on a first page of two:\n%s", text)
	}

	// Bad queries: 400 with a message that names what is wrong.
	for query, want := range map[string]string{
		"?limit=0":              "limit must be a whole number from 1 to 5000",
		"?limit=5001":           "limit must be a whole number from 1 to 5000",
		"?limit=ten":            `got "ten"`,
		"?state=down":           `state "down" is not one of wanted, admitted, starting, engaged, disconnected`,
		"?format=yaml":          "format must be json or text",
		"?limt=2":               `unknown query parameter "limt"`,
		"?limit=1&limit=2":      `"limit" given 2 times`,
		"?continue=%zz":         "malformed query",
		"?state=engaged,gone":   `state "gone"`,
		"?format=text&format=x": `"format" given 2 times`,
	} {
		code, body := getStatus(t, base, query, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 400 saying %q", query, code, body, want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, base, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}
