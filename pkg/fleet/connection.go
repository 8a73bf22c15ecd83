package fleet

import (
	"context"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
)

// A member published with a Config (Member.Config) is built by the engine
// from its connection, which the record holds across the member's
// publications: where the cluster is (its endpoint, compared once, here) and
// who the controller is there (the credentials, which the clusters built
// for the endpoint read from one build.Holder). A publication that names the
// same endpoint with other credentials is not a new member: its credentials
// are tried on the running cluster (build.TryCredentials) and rotated into
// it if the member accepts them, or, with nothing running to rotate into,
// given to a new attempt at once. Credentials the member rejects are
// reported once (a *build.RefusedCredentialsError) and tried again when the
// working ones fail too (a probe's 401, see refreshLocked).

// connection is what a record builds its clusters from. Guarded by the
// engine's lock.
type connection struct {
	// key is the endpoint's ("endpoint:" and build.EndpointHash), or, for
	// a configuration whose endpoint cannot be told apart from its
	// credentials, the provider's hash ("content:").
	key   string
	where *rest.Config
	creds *build.Holder
	// trial: new credentials tried on the running cluster, or refused by
	// it; nil for none.
	trial *credentialTrial
	// expiry warns of the expiry of the bearer token; nil for none.
	expiry *expiryWatch
}

// credentialTrial is new credentials of a running cluster, tried before they
// replace its working ones.
type credentialTrial struct {
	who    build.Credentials
	report func(error) // the publication's that gave them
	// running: a trial is in flight; refused: the member rejected them
	// (and it was reported).
	running, refused bool
}

// endpoint is a Config split in two (build.SplitCredentials), with the key
// of where: worked out before the engine's lock is taken, as hashing a CA
// bundle is not free.
type endpoint struct {
	where *rest.Config
	who   build.Credentials
	key   string
}

// endpointOf splits m's Config. The new credentials join the recent ones:
// the member's words are redacted of both (a request sent with the old
// ones may still fail).
func endpointOf(m *Member) endpoint {
	where, who := build.SplitCredentials(m.Config)
	redact.Known.RememberConfig(m.Name, m.Config)
	key := "content:" + m.Hash
	if h, ok := build.EndpointHash(where, who); ok {
		key = "endpoint:" + h
	}
	return endpoint{where: where, who: who, key: key}
}

// publishedAs reports whether the member of name is published with hash.
func (e *Engine) publishedAs(name, hash string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, ok := e.records.get(name)
	return ok && rec.member != nil && !rec.member.adopted && rec.member.Hash == hash
}

// connectLocked takes m, a publication of rec with a Config (at ep) and a
// new Hash: it reports whether m only rotates the credentials of the
// member rec runs (rec.member, updated in place); else it gives m a Build
// from rec's connection, a new one if m names another endpoint.
func (e *Engine) connectLocked(rec *record, m *Member, ep endpoint) (inPlace bool) {
	where, who, key := ep.where, ep.who, ep.key
	c, old := rec.conn, rec.member
	var expiry *expiryWatch
	if c != nil {
		expiry = c.expiry
	}
	if c != nil && c.key == key && old != nil && old.Config != nil {
		c.expiry = e.watchExpiryLocked(rec, who.BearerToken, expiry)
		if cl, running := e.Lookup(rec.name); running && rec.cur != nil && rec.cur.member == old && build.RotatesWith(cl, c.creds) {
			old.Hash, old.Config, old.Source = m.Hash, m.Config, m.Source
			old.Report, old.Refresh, old.Paused = m.Report, m.Refresh, m.Paused
			c.trial = &credentialTrial{who: who, report: m.Report}
			e.tryLocked(rec, cl, c.trial)
			return true
		}
		// Nothing runs to rotate into: an attempt in flight or waiting out
		// its backoff (refused credentials, an unreachable server) would
		// try the new credentials only at its next turn. A new member
		// starts one now.
		c.creds.Set(who)
		c.trial = nil
		e.log.Info("New credentials for a cluster that is not running: a new attempt starts with them now", "cluster", rec.name)
	} else {
		// A certificate that does not parse is left to client-go, whose
		// error the build reports.
		c = &connection{key: key, where: where, creds: build.NewHolder(who, who.HasCert() && strings.HasPrefix(key, "endpoint:"))}
		c.expiry = e.watchExpiryLocked(rec, who.BearerToken, expiry)
		rec.conn = c
	}
	m.Build = e.buildFrom(rec, c, m)
	return false
}

// buildFrom is the Build of m, a member with a Config: it builds from c's
// endpoint with the credentials c holds at the time, the engine's options
// and hook first, the member's after.
func (e *Engine) buildFrom(rec *record, c *connection, m *Member) func(context.Context) (cluster.Cluster, error) {
	return func(life context.Context) (cluster.Cluster, error) {
		e.mu.Lock()
		source := m.Source // the last one published with its Hash
		e.mu.Unlock()
		opts, settings := e.opts.construction(rec.name)
		opts = append(opts[:len(opts):len(opts)], m.Options...)
		return build.FromEndpoint(life, rec.name, c.where, c.creds, source, settings, opts)
	}
}

// dropConnectionLocked forgets rec's connection: its member is removed, or
// replaced by one that is not built from a Config.
func (rec *record) dropConnectionLocked() {
	if rec.conn != nil {
		rec.conn.expiry.stop()
		rec.conn = nil
	}
}

// tryLocked tries t's credentials on cl, the cluster rec runs.
func (e *Engine) tryLocked(rec *record, cl cluster.Cluster, t *credentialTrial) {
	if e.closing {
		return
	}
	t.running = true
	e.wg.Go(func() { e.tried(rec, t, build.TryCredentials(e.base, cl, t.who)) })
}

// tried applies the outcome of t's trial: the credentials rotate in, unless
// the member rejected them; then the refusal is reported, once.
func (e *Engine) tried(rec *record, t *credentialTrial, err error) {
	e.mu.Lock()
	c := rec.conn
	if rec.gone || c == nil || c.trial != t {
		e.mu.Unlock()
		return // removed, rebuilt or given other credentials since
	}
	t.running = false
	if err == nil || !build.Rejected(err) {
		c.creds.Set(t.who)
		c.trial = nil
		if err != nil {
			e.log.Info("Could not try the cluster's new credentials; rotated them in place all the same", "cluster", rec.name, "error", redact.Known.ClusterErr(rec.name, err).Error())
		} else {
			e.log.Info("Rotated the cluster's credentials in place: same server and CA, new credentials the member accepts", "cluster", rec.name)
		}
		e.mu.Unlock()
		return
	}
	first := !t.refused
	t.refused = true
	log := e.log.WithValues("cluster", rec.name)
	if m := rec.member; m != nil && m.Source != nil {
		log = log.WithValues("source", klog.KObj(m.Source))
	}
	e.mu.Unlock()
	if !first {
		return
	}
	refusal := &build.RefusedCredentialsError{Cluster: rec.name, Err: redact.Known.ClusterErr(rec.name, err)}
	log.Error(refusal, "Refused a rotation of the cluster's credentials: the member rejects the new ones; it keeps running with its working ones")
	if t.report != nil {
		t.report(refusal)
	}
}

// refresher is what a probe's 401 or 403 calls, outside the engine's lock:
// the provider's Refresh, which may publish new credentials, then the trial
// again of those the member refused before.
func (e *Engine) refresher(rec *record, provider func()) func() {
	return func() {
		if provider != nil {
			provider()
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.retryTrialLocked(rec)
	}
}

// retryTrialLocked follows a probe's 401 or 403: the working credentials
// fail too. Those the member refused before are tried again, or, with
// nothing running to keep, given to the next attempt.
func (e *Engine) retryTrialLocked(rec *record) {
	c := rec.conn
	if rec.gone || c == nil || c.trial == nil || c.trial.running || rec.member == nil || e.closing {
		return
	}
	t := c.trial
	if cl, running := e.Lookup(rec.name); running && build.RotatesWith(cl, c.creds) {
		e.tryLocked(rec, cl, t)
		return
	}
	c.creds.Set(t.who)
	c.trial = nil
	e.log.Info("The cluster's working credentials failed too: its next attempt is made with those of its source", "cluster", rec.name)
	old := rec.member
	m := &Member{Name: old.Name, Hash: old.Hash, Config: old.Config, Source: old.Source, Options: old.Options,
		Report: t.report, Paused: old.Paused, Refresh: old.Refresh, Indexes: old.Indexes}
	m.Build = e.buildFrom(rec, c, m)
	e.setMemberLocked(rec, m, "its working credentials failed: the source's are tried")
}

// expiryWatch is the expiry warning of one token of one member, and its
// series in multicluster_cluster_credentials_expiry_timestamp_seconds while
// it is current.
type expiryWatch struct {
	name  string
	token string
	at    time.Time
	exp   time.Time
	timer *time.Timer
}

func (w *expiryWatch) stop() {
	if w != nil {
		w.timer.Stop()
		unexportExpiry(w.name)
	}
}

// watchExpiryLocked returns the expiry warning of rec's token, which its
// member's Report hears (or the log, without one); old is the warning of
// the token rec had: the same token keeps it (a warning given is not given
// again), another stops it.
func (e *Engine) watchExpiryLocked(rec *record, token string, old *expiryWatch) *expiryWatch {
	if old != nil && old.token == token {
		return old
	}
	old.stop()
	at, exp, ok := build.ExpiryWarningAt(token, time.Now())
	if !ok {
		return nil
	}
	w := &expiryWatch{name: rec.name, token: token, at: at, exp: exp}
	exportExpiry(w)
	w.timer = time.AfterFunc(time.Until(at), func() {
		e.mu.Lock()
		current := !rec.gone && rec.conn != nil && rec.conn.expiry == w
		var report func(error)
		if current && rec.member != nil {
			report = rec.member.Report
		}
		e.mu.Unlock()
		if !current {
			return // rotated or removed since
		}
		if report == nil {
			e.log.Info("Cluster's bearer token expires soon and its source has not given another", "cluster", rec.name, "expires", exp.UTC())
			return
		}
		report(&build.ExpiringCredentialsError{Cluster: rec.name, Expires: exp})
	})
	return w
}

// expiryWarning returns when the engine warns of the expiry of name's
// token, if it will (for tests, through internal/fleetpeek).
func (e *Engine) expiryWarning(name string) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, ok := e.records.get(name)
	if !ok || rec.conn == nil || rec.conn.expiry == nil {
		return time.Time{}, false
	}
	return rec.conn.expiry.at, true
}
