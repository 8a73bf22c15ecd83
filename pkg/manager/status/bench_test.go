package status_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/manager/status"
)

// BenchmarkStatusEndpoint serves the endpoint for a fleet of 10,000
// clusters (members of a running engine, built through its public API; one
// in 50 disconnected with an error, one in 100 paused): a page of the
// default 500 and of the maximum 5000 in JSON and in text, a filtered page,
// and a walk of every page of 500. Engine.Clusters, the engine's listing
// of names and states alone, is the reference: the floor of any pass over
// the records. ms/page and ms/walk are a page's and a walk's wall time,
// cpu-ms/page and cpu-ms/walk the CPU the process spent on them (the
// garbage collector's share included).
//
//	go test -run '^$' -bench BenchmarkStatusEndpoint -benchmem ./pkg/manager/status/
func BenchmarkStatusEndpoint(b *testing.B) {
	const n = 10000
	e := fakeFleet(b, n)
	h := status.NewHandler(e, status.Options{})
	serve := func(b *testing.B, query string) (size int) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/clusters"+query, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", query, rec.Code, rec.Body)
		}
		return rec.Body.Len()
	}
	for _, page := range []struct{ name, query string }{
		{"page=500/json", ""},
		{"page=500/text", "?format=text"},
		{"page=5000/json", "?limit=5000"},
		{"page=500-after-9000/json", "?continue=cluster-09000"},
		{"state=disconnected/json", "?state=disconnected"},
	} {
		b.Run(page.name, func(b *testing.B) {
			var size int
			cpu0 := processCPU()
			for b.Loop() {
				size = serve(b, page.query)
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/page")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
	b.Run("walk=500/json", func(b *testing.B) {
		pages := 0
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			q := url.Values{"limit": {"500"}}
			for {
				cpu0 := processCPU()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/clusters?"+q.Encode(), nil))
				pages++
				// The client's share, reading where the next page starts, is
				// not the endpoint's.
				b.StopTimer()
				cpu += processCPU() - cpu0
				var doc struct{ Continue string }
				if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if doc.Continue == "" {
					break
				}
				q.Set("continue", doc.Continue)
			}
		}
		if pages/b.N != n/500 {
			b.Fatalf("%d pages a walk, want %d", pages/b.N, n/500)
		}
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/walk")
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/walk")
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(pages), "ms/page")
	})
	b.Run("reference=Engine.Clusters", func(b *testing.B) {
		cpu0 := processCPU()
		for b.Loop() {
			if got := len(e.Clusters()); got != n {
				b.Fatalf("%d clusters", got)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
}

// processCPU is the user and system CPU time of the whole process so far:
// on a shared machine, a page's CPU swings less than its wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
