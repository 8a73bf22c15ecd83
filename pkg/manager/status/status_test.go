package status_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t testing.TB, h http.Handler, query string) status.List {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/clusters"+query, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", query, rec.Code, rec.Body)
	}
	var doc status.List
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// walk lists every page of query with limit, and returns the names in the
// order listed and the number of pages.
func walk(t testing.TB, h http.Handler, limit int, query url.Values) (names []string, pages int) {
	t.Helper()
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	for k, v := range query {
		q[k] = v
	}
	for {
		doc := get(t, h, "?"+q.Encode())
		pages++
		if len(doc.Clusters) > limit {
			t.Fatalf("a page of %d clusters, limit %d", len(doc.Clusters), limit)
		}
		for _, c := range doc.Clusters {
			names = append(names, c.Name)
		}
		if doc.Continue == "" {
			return names, pages
		}
		q.Set("continue", doc.Continue)
	}
}

// Pages are cut by name: whatever the limit, a walk lists every cluster
// once, in order, in ceil(n/limit) pages, and a state filter selects the
// same clusters as the listing does.
func TestWalkListsEachClusterOnce(t *testing.T) {
	const n = 1000
	e := fakeFleet(t, n)
	h := status.NewHandler(e, status.Options{})
	var all, disconnected, paused []string
	for _, s := range e.Clusters() {
		all = append(all, s.Name)
		if s.State == fleet.StateDisconnected {
			disconnected = append(disconnected, s.Name)
		}
	}
	for _, limit := range []int{1, 7, 333, 500, 999, 1000, 5000} {
		got, pages := walk(t, h, limit, nil)
		if !slices.Equal(got, all) || pages != max(1, (n+limit-1)/limit) {
			t.Errorf("limit %d: %d names in %d pages, sorted %t, want %d in %d", limit, len(got), pages, slices.IsSorted(got), n, (n+limit-1)/limit)
		}
	}
	got, _ := walk(t, h, 7, url.Values{"state": {"disconnected"}})
	if !slices.Equal(got, disconnected) || len(got) != n/50 {
		t.Errorf("disconnected: %v, want %v", got, disconnected)
	}
	doc := get(t, h, "?limit=5000")
	if doc.Total != n || doc.Continue != "" || len(doc.Clusters) != n {
		t.Errorf("one page of everything: total %d, continue %q, %d clusters", doc.Total, doc.Continue, len(doc.Clusters))
	}
	for _, c := range doc.Clusters {
		if c.Paused {
			paused = append(paused, c.Name)
		}
		switch {
		case c.State == "disconnected" && (c.LastError == "" || c.LastErrorTime == nil || c.Since == nil):
			t.Errorf("%s: disconnected with no last error or since: %+v", c.Name, c)
		case c.State == "engaged" && (c.LastError != "" || c.Since == nil):
			t.Errorf("%s: %+v", c.Name, c)
		case !c.OwnedHere:
			t.Errorf("%s: not owned here without sharding", c.Name)
		}
	}
	if len(paused) != n/100 {
		t.Errorf("%d paused, want %d", len(paused), n/100)
	}
	// A continue between two names, and one past the last.
	if doc := get(t, h, "?limit=2&continue=cluster-00005x"); len(doc.Clusters) != 2 || doc.Clusters[0].Name != "cluster-00006" {
		t.Errorf("after cluster-00005x: %+v", doc.Clusters)
	}
	if doc := get(t, h, "?continue=zzz"); len(doc.Clusters) != 0 || doc.Continue != "" || doc.Total != n {
		t.Errorf("after the last: %+v", doc)
	}
}

// The last error is redacted: URLs lose their user info and query, and file
// paths of the controller's machine are left out.
func TestLastErrorIsRedacted(t *testing.T) {
	e := fakeFleet(t, 10)
	doc := get(t, status.NewHandler(e, status.Options{}), "?state=disconnected")
	if len(doc.Clusters) != 1 {
		t.Fatalf("disconnected: %+v", doc.Clusters)
	}
	msg := doc.Clusters[0].LastError
	if strings.Contains(msg, "secret") || strings.Contains(msg, "abc") || !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "[redacted]@member.example") {
		t.Errorf("last error %q: want the refusal, the URL's credentials redacted", msg)
	}
	if strings.Contains(msg, "/etc/fleet") || !strings.Contains(msg, "read from [path]") {
		t.Errorf("last error %q: want the controller's file path left out", msg)
	}
}

// Listing never takes the engine's lock: pages are served while members
// come and go, each cluster present throughout listed once.
func TestWalkWhileTheFleetChanges(t *testing.T) {
	const n = 300
	e := fakeFleet(t, n)
	h := status.NewHandler(e, status.Options{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("churn-%03d", r.IntN(50))
			if i%2 == 0 {
				e.SetMember(fleet.Member{Name: name, Hash: "1", Cluster: fakeCluster{}})
			} else {
				e.RemoveMember(name)
			}
		}
	}()
	for range 20 {
		got, _ := walk(t, h, 17, nil)
		var stable []string
		for _, name := range got {
			if strings.HasPrefix(name, "cluster-") {
				stable = append(stable, name)
			}
		}
		if len(stable) != n || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("a walk during churn listed %d of the %d stable clusters (sorted %t)", len(stable), n, slices.IsSorted(got))
		}
	}
	close(stop)
	<-done
	for i := range 50 {
		e.RemoveMember(fmt.Sprintf("churn-%03d", i))
	}
}

// Under sharding, each cluster says whether this replica owns it, and
// which replica does.
func TestOwnerUnderSharding(t *testing.T) {
	e := fakeFleetWith(t, 10, replicas{})
	rec := httptest.NewRecorder()
	h := status.NewHandler(e, status.Options{})
	doc := get(t, h, "")
	if len(doc.Clusters) != 10 {
		t.Fatalf("%d clusters listed, want 10", len(doc.Clusters))
	}
	for i, c := range doc.Clusters {
		here := i%2 == 0
		want, state := "replica-b", "wanted"
		if here {
			want, state = "replica-a", "engaged"
		}
		if c.OwnedHere != here || c.Owner != want || c.State != state {
			t.Errorf("%s: owned here %t by %q, %s; want %t by %q, %s", c.Name, c.OwnedHere, c.Owner, c.State, here, want, state)
		}
	}
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/clusters?format=text&limit=2", nil))
	lines := strings.Split(rec.Body.String(), "\n")
	if f := strings.Fields(lines[1]); f[0] != "cluster-00000" || f[4] != "replica-a" {
		t.Errorf("text form: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "cluster-00001" || f[1] != "wanted" || f[4] != "replica-b" {
		t.Errorf("text form: %q", lines[2])
	}
}

func TestBadQueries(t *testing.T) {
	h := status.NewHandler(fleet.New(fleet.Options{}), status.Options{DefaultLimit: 10, MaxLimit: 100})
	for query, want := range map[string]string{
		"?limit=101":             "limit must be a whole number from 1 to 100",
		"?limit=-1":              "limit must be a whole number from 1 to 100",
		"?state=":                `state "" is not one of`,
		"?format=":               "format must be json or text",
		"?everything=1":          `unknown query parameter "everything"`,
		"?state=a;b":             "malformed query",
		"?continue=a&continue=b": `"continue" given 2 times`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/clusters"+query, nil))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %d %q, want 400 saying %q", query, rec.Code, rec.Body, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/clusters", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

// lister lists fixed statuses: the text form's unit test.
type lister []fleet.ClusterStatus

func (l lister) List(fleet.ListOptions) ([]fleet.ClusterStatus, int, bool) { return l, len(l), false }

// Names and errors come from the inventory and the clusters: the text form
// keeps each cluster on one line, without a terminal's escapes, and cuts
// long errors on a character's boundary.
func TestTextFormKeepsOneLinePerCluster(t *testing.T) {
	long := strings.Repeat("é", 200)
	h := status.NewHandler(lister{
		{Status: fleet.Status{Name: "evil\x1b[2J\nname", State: fleet.StateEngaged}},
		{Status: fleet.Status{Name: "b", State: fleet.StateDisconnected}, LastError: "first line\nsecond\tline " + long, LastErrorAt: time.Now()},
	}, status.Options{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/clusters?format=text", nil))
	text := rec.Body.String()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 4 || strings.ContainsRune(text, '\x1b') || !utf8.ValidString(text) {
		t.Fatalf("text form:\n%q", text)
	}
	if !strings.HasPrefix(lines[1], "evil [2J name ") || !strings.Contains(lines[2], "first line second line é") || !strings.HasSuffix(lines[2], "é...") {
		t.Errorf("text form:\n%s", text)
	}
	if rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers: %v", rec.Header())
	}
}
