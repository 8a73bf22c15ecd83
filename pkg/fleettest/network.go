package fleettest

import (
	"fmt"
	"net/url"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/internal/netfault"
)

// Faults stand between a member and its clients and break the network on
// demand, so that a test sees what its controller does when a member fails:
// Cut it off, Blackhole it, Slow it down, or SilenceWatches (the member
// answers, its watches deliver nothing). Restore ends every fault.
//
// Clients reach the member through Config: plain HTTP to a local proxy,
// which talks to the API server with the member's admin credentials (the
// proxy reads the requests to tell watches from the rest, so it cannot pass
// a client's TLS identity on). A Provider with ProviderOptions.Faulty
// engages its members so. Get a member's with Fleet.Faults; they live as
// long as the member.
type Faults struct {
	tcp *netfault.Proxy    // in front: cut, black-hole, slow
	api *netfault.APIProxy // behind it: silences watches
	cfg *rest.Config
}

// Faults returns the faults of member i, started on first use and stopped
// with the member. It panics if their proxies cannot listen on the loopback
// interface, as httptest.NewServer does.
func (f *Fleet) Faults(i int) *Faults {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faults == nil {
		f.faults = make([]*Faults, len(f.envs))
	}
	if x := f.faults[i]; x != nil {
		return x
	}
	x, err := startFaults(f.configs[i])
	if err != nil {
		panic(fmt.Sprintf("fleettest: faults of member %d: %v", i, err))
	}
	f.faults[i] = x
	return x
}

func startFaults(cfg *rest.Config) (*Faults, error) {
	api, err := netfault.StartAPIProxy(cfg)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(api.Config().Host)
	if err != nil {
		api.Close()
		return nil, err
	}
	tcp, err := netfault.StartProxy(u.Host)
	if err != nil {
		api.Close()
		return nil, err
	}
	tcp.SetUp(true)
	out := api.Config()
	out.Host = "http://" + tcp.Addr()
	out.QPS, out.Burst = cfg.QPS, cfg.Burst
	return &Faults{tcp: tcp, api: api, cfg: out}, nil
}

// Config returns a config that reaches the member through its faults.
func (x *Faults) Config() *rest.Config { return rest.CopyConfig(x.cfg) }

// Cut closes every connection to the member and refuses new ones, until
// Restore: the member vanished.
func (x *Faults) Cut() { x.tcp.Cut() }

// Blackhole closes every connection to the member and holds new ones open
// without answering a byte, until Restore: a member behind a firewall that
// drops packets, whose clients wait for their timeouts.
func (x *Faults) Blackhole() { x.tcp.Blackhole() }

// Slow delays every chunk of bytes to and from the member by d, on the
// connections open and to come, until Restore or Slow(0): a request and its
// answer take about 2d more.
func (x *Faults) Slow(d time.Duration) { x.tcp.Slow(d) }

// SilenceWatches keeps the member's connections and answers every request
// (/readyz, lists, writes) but stops forwarding watch events and bookmarks,
// on the watches open and to come: the member looks healthy and its
// controllers hear nothing of it. A watch silenced stays silent until its
// client closes it, even after Restore, as a stream stuck between a client
// and its server does; only a new watch delivers again.
func (x *Faults) SilenceWatches() { x.api.SilenceWatches() }

// Restore ends every fault: connections are accepted and forwarded at once
// again, and new watches deliver.
func (x *Faults) Restore() {
	x.tcp.Slow(0)
	x.tcp.SetUp(true)
	x.api.ForwardWatches()
}

// close stops the proxies.
func (x *Faults) close() {
	x.tcp.Close()
	x.api.Close()
}
