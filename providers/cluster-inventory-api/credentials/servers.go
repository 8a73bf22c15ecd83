package credentials

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// ErrServerRefused is returned, wrapped, for a profile whose server an
// access provider's credentials may not be sent to.
var ErrServerRefused = errors.New("server refused")

// ProfilePolicy says what a profile's cluster entry may ask for beyond a
// server and its CA. A profile is written by whoever can write ClusterProfile
// status on the hub; the credentials the access providers mint are the
// controller's. The zero value refuses proxy-url, insecure-skip-tls-verify,
// tls-server-name and every local file reference, and servers on loopback,
// link-local and unspecified addresses and the hub's own address.
type ProfilePolicy struct {
	// AllowProxyURL accepts a profile's proxy-url: the profile's writer then
	// chooses a proxy that sees every connection to the member; with TLS
	// verified against the profile's CA it sees no credentials, unless the
	// writer also controls that CA. Default: refused.
	AllowProxyURL bool
	// AllowInsecureSkipTLSVerify accepts insecure-skip-tls-verify: the
	// member is then not authenticated and the credentials go to whoever
	// answers. Default: refused.
	AllowInsecureSkipTLSVerify bool
	// AllowTLSServerName accepts tls-server-name: the member's certificate
	// is verified against a name of the profile's choice instead of the
	// server's host. Default: refused.
	AllowTLSServerName bool
	// HubServer is the hub's API server URL, whose address profiles may not
	// name unless an access provider's AllowedServers does. The provider's
	// SetupWithManager sets it from the manager's host configuration when
	// empty.
	HubServer string
}

// hubHostPort returns the host:port of the hub's server URL, or "".
func hubHostPort(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// serverCheck decides whether an access provider's credentials may go to a
// server.
type serverCheck struct {
	allowed []string // the access provider's AllowedServers
	hub     string   // host:port of the hub, "" if unknown
}

// check returns an error for a server the credentials may not go to, and
// whether a dial to it must be checked once resolved (a host name that no
// pattern allowed explicitly).
func (c serverCheck) check(server string) (checkDial bool, err error) {
	u, err := url.Parse(server)
	if err != nil {
		return false, fmt.Errorf("%w: the server is not a URL", ErrServerRefused)
	}
	if u.Scheme != "https" {
		return false, fmt.Errorf("%w: the server's scheme is %q, not https: credentials would travel in clear", ErrServerRefused, u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return false, fmt.Errorf("%w: the server has no host", ErrServerRefused)
	}
	if port == "" {
		port = "443"
	}
	hostPort := net.JoinHostPort(host, port)
	matched, byName := c.match(host, hostPort)
	if len(c.allowed) > 0 && !matched {
		return false, fmt.Errorf("%w: %s is not among the access provider's allowedServers", ErrServerRefused, hostPort)
	}
	if matched {
		return false, nil
	}
	if reason := special(host); reason != "" {
		return false, fmt.Errorf("%w: %s is %s; list it in the access provider's allowedServers to allow it", ErrServerRefused, hostPort, reason)
	}
	if c.hub != "" && strings.EqualFold(hostPort, c.hub) {
		return false, fmt.Errorf("%w: %s is the hub's own API server; list it in the access provider's allowedServers to allow it", ErrServerRefused, hostPort)
	}
	_, isIP := parseIP(host)
	return !isIP && !byName, nil
}

// match reports whether an allowed entry matches the server, and whether the
// match was by host name (so that the name may resolve anywhere).
func (c serverCheck) match(host, hostPort string) (matched, byName bool) {
	ip, isIP := parseIP(host)
	for _, a := range c.allowed {
		if prefix, err := netip.ParsePrefix(a); err == nil {
			if isIP && prefix.Contains(ip) {
				return true, false
			}
			continue
		}
		pattern := strings.ToLower(a)
		target := strings.ToLower(host)
		if strings.Contains(pattern, ":") { // host:port
			target = strings.ToLower(hostPort)
		}
		if ok, _ := path.Match(pattern, target); ok {
			return true, !isIP
		}
	}
	return false, false
}

// validateAllowedServers checks an access provider's AllowedServers.
func validateAllowedServers(allowed []string) error {
	for _, a := range allowed {
		if _, err := netip.ParsePrefix(a); err == nil {
			continue
		}
		if a == "" || strings.Contains(a, "/") {
			return fmt.Errorf("allowedServers entry %q is neither a CIDR nor a host[:port] pattern", a)
		}
		if _, err := path.Match(a, ""); err != nil {
			return fmt.Errorf("allowedServers entry %q: %w", a, err)
		}
	}
	return nil
}

func parseIP(host string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// special names why credentials must not go to host unless allowed
// explicitly, or returns "".
func special(host string) string {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return "a loopback name"
	}
	ip, ok := parseIP(host)
	if !ok {
		return ""
	}
	return specialIP(ip)
}

func specialIP(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address (cloud metadata services live there)"
	case ip.IsUnspecified():
		return "the unspecified address"
	}
	return ""
}

// guardDial makes cfg refuse, once a host name is resolved, to connect to a
// loopback, link-local or unspecified address: a profile's DNS name cannot
// then lead the credentials back into the controller's own network
// namespace.
func guardDial(cfg *rest.Config) {
	d := &net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot parse the resolved address %q", ErrServerRefused, address)
			}
			if reason := specialIP(ap.Addr().Unmap()); reason != "" {
				return fmt.Errorf("%w: the server's name resolves to %s, %s", ErrServerRefused, ap.Addr(), reason)
			}
			return nil
		},
	}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		return d.DialContext(ctx, network, address)
	}
}
