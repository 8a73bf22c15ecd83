package clusters

import (
	"fmt"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// expiryWatch is the expiry warning of one token of one member, and its
// series in multicluster_cluster_credentials_expiry_timestamp_seconds while
// it is current.
type expiryWatch struct {
	name  multicluster.ClusterName
	token string
	at    time.Time
	exp   time.Time
	timer *time.Timer
}

func (e *expiryWatch) stop() {
	if e != nil {
		e.timer.Stop()
		unexportExpiry(e.name)
	}
}

// watchExpiry returns the expiry warning of name's token, which report
// hears (or the log, without report); old is the warning of the token name
// had: the same token keeps it (a warning given is not given again), another
// stops it. The caller holds m.mu.
func (m *Members) watchExpiry(name multicluster.ClusterName, token string, report func(error), old *expiryWatch) *expiryWatch {
	if old != nil && old.token == token {
		return old
	}
	old.stop()
	at, exp, ok := build.ExpiryWarningAt(token, time.Now())
	if !ok {
		return nil
	}
	w := &expiryWatch{name: name, token: token, at: at, exp: exp}
	exportExpiry(name, w)
	w.timer = time.AfterFunc(time.Until(at), func() {
		m.mu.Lock()
		current := m.hashes[name].expiry == w
		log := m.log
		m.mu.Unlock()
		if !current {
			return // rotated or removed since
		}
		err := &ExpiringCredentialsError{Cluster: name, Expires: exp}
		if report == nil {
			log.Info("Cluster's bearer token expires soon and its source has not given another", "cluster", name, "expires", exp.UTC())
			return
		}
		report(err)
	})
	return w
}

// tryLocked tries t's credentials on cl, the cluster name runs. The caller
// holds m.mu.
func (m *Members) tryLocked(name multicluster.ClusterName, cl cluster.Cluster, t *credentialTrial) {
	t.running = true
	ctx := m.ctx
	m.wg.Go(func() { m.tried(name, cl, t, build.TryCredentials(ctx, cl, t.who)) })
}

// tried applies the outcome of t's trial on cl: the credentials rotate in,
// unless the member rejected them; then the refusal is reported, once.
func (m *Members) tried(name multicluster.ClusterName, cl cluster.Cluster, t *credentialTrial, err error) {
	m.mu.Lock()
	w, ok := m.hashes[name]
	if !ok || w.trial != t {
		m.mu.Unlock()
		return // removed, rebuilt or given other credentials since
	}
	t.running = false
	if err == nil || !build.Rejected(err) {
		w.creds.Set(t.who)
		w.trial = nil
		m.hashes[name] = w
		if err != nil {
			m.log.Info("Could not try the cluster's new credentials; rotated them in place all the same", "cluster", name, "error", redact.Known.ClusterErr(name, err).Error())
		} else {
			m.log.Info("Rotated the cluster's credentials in place: same server and CA, new credentials the member accepts", "cluster", name)
		}
		m.mu.Unlock()
		return
	}
	first := !t.refused
	t.refused = true
	log := m.log.WithValues("cluster", name)
	if w.source != nil {
		log = log.WithValues("source", klog.KObj(w.source))
	}
	m.mu.Unlock()
	if !first {
		return
	}
	refusal := &RefusedCredentialsError{Cluster: name, Err: redact.Known.ClusterErr(name, err)}
	log.Error(refusal, "Refused a rotation of the cluster's credentials: the member rejects the new ones; it keeps running with its working ones")
	if t.report != nil {
		t.report(refusal)
	}
}

// refresh is a member's Refresh: the cluster rejects its credentials. The
// provider reads its source again; credentials the member refused before
// are tried again, or, with nothing running to keep, given to the next
// attempt.
func (m *Members) refresh(name multicluster.ClusterName) {
	if m.Refresh != nil {
		m.Refresh(name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.hashes[name]
	t := w.trial
	if !ok || t == nil || t.running || m.ctx.Err() != nil {
		return
	}
	if cl, running := m.pub.Lookup(name); running && build.RotatesWith(cl, w.creds) {
		m.tryLocked(name, cl, t)
		return
	}
	w.creds.Set(t.who)
	w.trial = nil
	w.published = fmt.Sprintf("%s@%d", w.key, w.creds.Generation())
	m.hashes[name] = w
	m.log.Info("The cluster's working credentials failed too: its next attempt is made with those of its source", "cluster", name)
	m.pub.SetMember(m.memberLocked(name, w, t.report))
}

// credentialTrial is new credentials of a running cluster, tried before they
// replace its working ones. Guarded by the members' lock.
type credentialTrial struct {
	who    Credentials
	report func(error) // the Set's that gave them
	// running: a trial is in flight; refused: the member rejected them
	// (and it was reported).
	running, refused bool
}
