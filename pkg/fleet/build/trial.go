package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// New credentials rotated into a running cluster replace working ones: a
// source edited to a token the member rejects (a typo, a token of another
// cluster, one already revoked) would make every request of the cluster fail
// with 401 at once, and the probes disconnect it soon after. So Members
// tries new credentials first, with one authenticated request (GET /version,
// which every identity may make) through the cluster's own transport, and
// rotates them in only if the member accepts them, or if the trial could not
// tell (no answer: the source's word stands, as it would for a new cluster).
// Credentials the member rejects are reported once, on the source object
// through the report of the Set that gave them, and the cluster keeps the
// ones it runs with. They are tried again when the cluster rejects its
// working ones (the probes' refresh); a cluster whose old and new
// credentials both fail is disconnected, and its next attempt is made with
// the source's.

// trialTimeout bounds the trial of new credentials.
const trialTimeout = 10 * time.Second

// RefusedCredentialsError is reported (see Members.Set) when the member
// rejects the credentials a cluster's source gave while the cluster runs
// with others: the cluster keeps those. It names the cluster, never the
// credentials.
type RefusedCredentialsError struct {
	Cluster multicluster.ClusterName
	// Err is the member's answer to the trial, redacted.
	Err error
}

func (e *RefusedCredentialsError) Error() string {
	return fmt.Sprintf("cluster %q: the member rejects the new credentials of its source (%v); the cluster keeps running with its previous ones: put credentials the member accepts in the source",
		e.Cluster, e.Err)
}

func (e *RefusedCredentialsError) Unwrap() error { return e.Err }

// errRejected is the server's rejection of a trial's credentials: a 401
// or 403, as the engine's probes read one.
var errRejected = errors.New("rejected")

func Rejected(err error) bool { return errors.Is(err, errRejected) }

// trialKey is the context key of a request that carries a trial's
// credentials instead of its cluster's current ones (a *trial).
type trialKey struct{}

// trial is the credentials of one trial request, and whether the request
// went through its cluster's credentials transport.
type trial struct {
	creds   *Holder // the cluster's
	state   *credentialState
	reached atomic.Bool
}

// trialAuth returns the Authorization of t's request: its trial's, if
// req carries one for t's holder.
func (t *credentialsTransport) trialAuth(ctx context.Context, s *credentialState) string {
	if tr, ok := ctx.Value(trialKey{}).(*trial); ok && tr.creds == t.creds {
		tr.reached.Store(true)
		return tr.state.auth
	}
	return s.auth
}

// TryCredentials makes one authenticated request to cl's server with who:
// through cl's own HTTP client (its pooled connection, its settings), or,
// for a new client certificate, which a connection presents when it is
// made, over a connection of its own, closed after.
func TryCredentials(ctx context.Context, c cluster.Cluster, who Credentials) error {
	cl, ok := c.(*lightCluster)
	if !ok || cl.current == nil {
		return fmt.Errorf("the cluster was not built with a credentials holder: its credentials cannot be tried")
	}
	ctx, cancel := context.WithTimeout(ctx, trialTimeout)
	defer cancel()
	creds := cl.current.creds
	cfg, hc := cl.GetConfig(), cl.GetHTTPClient()
	var tr *trial
	if cur := creds.cur.Load().who; creds.certs && (!bytes.Equal(cur.CertData, who.CertData) || !bytes.Equal(cur.KeyData, who.KeyData)) {
		where, _ := SplitCredentials(cfg)
		cfg = withCredentials(where, who)
		conns := connrotation.NewDialer((&net.Dialer{Timeout: trialTimeout}).DialContext)
		defer conns.CloseAll()
		cfg.Dial = conns.DialContext
		var err error
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			return fmt.Errorf("creating the client of the trial: %w", err)
		}
	} else {
		tr = &trial{creds: creds, state: credentialStateOf(who, 0)}
		ctx = context.WithValue(ctx, trialKey{}, tr)
	}
	// A plain request: a REST client built for one request would cost
	// more than the request (a fleet's tokens rotate all at once).
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return fmt.Errorf("the server's URL: %w", err)
	}
	u.Path, u.RawQuery = path.Join("/", u.Path, "version"), "" // behind the server's path prefix, if any
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("the trial request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: the server answered %s", errRejected, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("the server answered %s", resp.Status)
	case tr != nil && !tr.reached.Load():
		// An HTTP client of the cluster's options, which sets
		// credentials of its own: the answer says nothing of who's.
		return fmt.Errorf("the cluster's HTTP client does not carry rotated credentials")
	}
	return nil
}
