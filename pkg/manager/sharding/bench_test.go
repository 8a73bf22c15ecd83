package sharding_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// BenchmarkHandOff measures how long the clusters of a replica take to reach
// the other one, from the moment the first stops cleanly or is cut off from
// the host (a crash: it neither renews nor releases). Lease 3s, renew deadline
// 2s, retry period 500ms; 30 and 300 clusters over 2 replicas.
func BenchmarkHandOff(b *testing.B) {
	opts := timing(3*time.Second, 2*time.Second, 500*time.Millisecond)
	for _, tc := range []struct {
		mode string
		n    int
	}{{"clean", 30}, {"crash", 30}, {"clean", 300}, {"crash", 300}} {
		mode, names := tc.mode, clusterNames(tc.n)
		b.Run(fmt.Sprintf("%s/%d", mode, tc.n), func(b *testing.B) {
			var total time.Duration
			for i := range b.N {
				group := fmt.Sprintf("bench-handoff-%s-%d-%d", mode, len(names), i)
				rec := &recorder{}
				a := startReplica(b, group, "a", opts, names, rec)
				startReplica(b, group, "b", opts, names, rec)
				owners := rec.expectCoverage(b, names, time.Minute)
				moving := 0
				for _, o := range owners {
					if o == "a" {
						moving++
					}
				}
				start := time.Now()
				if mode == "clean" {
					go a.stop()
				} else {
					a.noRelease.Store(true)
					a.cut.Store(true)
					rec.closeAll("a", start)
				}
				rec.expectCoverage(b, names, time.Minute, "b")
				d := time.Since(start)
				total += d
				b.Logf("%s: %d clusters moved in %s", mode, moving, d)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "handoff-ms")
			b.ReportMetric(float64(opts.LeaseDuration.Milliseconds()), "lease-ms")
		})
	}
}

// counting counts the requests a coordinator sends.
type counting struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// BenchmarkRenewCalls holds 300 and 1,000 fences in one replica and counts the
// API requests it sends per renew period (RetryPeriod 1s, over 5 periods), and
// the requests and time it takes to acquire them.
func BenchmarkRenewCalls(b *testing.B) {
	for _, n := range []int{300, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := range b.N {
				var calls atomic.Int64
				cfg := rest.CopyConfig(host)
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counting{rt: rt, n: &calls} })
				log := logr.Discard()
				c, err := sharding.New(cfg, sharding.Options{
					Name: fmt.Sprintf("bench-renew-%d-%d", n, i), Identity: "r",
					LeaseDuration: 10 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: time.Second,
					Logger: &log,
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- c.Start(ctx) }()

				start, before := time.Now(), calls.Load()
				releases := make([]func(), n)
				sem := make(chan struct{}, 32)
				var wg sync.WaitGroup
				for j, name := range clusterNames(n) {
					sem <- struct{}{}
					wg.Go(func() {
						defer func() { <-sem }()
						_, release, err := c.Acquire(ctx, name)
						if err != nil {
							b.Error(err)
							return
						}
						releases[j] = release
					})
				}
				wg.Wait()
				acquired, acquireCalls := time.Since(start), calls.Load()-before

				const periods = 5
				before = calls.Load()
				time.Sleep(periods * time.Second)
				perPeriod := float64(calls.Load()-before) / periods

				for _, release := range releases {
					if release != nil {
						sem <- struct{}{}
						wg.Go(func() { defer func() { <-sem }(); release() })
					}
				}
				wg.Wait()
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(perPeriod, "calls/renew-period")
				b.ReportMetric(float64(acquireCalls)/float64(n), "calls/acquire")
				b.ReportMetric(float64(acquired.Milliseconds()), "acquire-all-ms")
			}
		})
	}
}
