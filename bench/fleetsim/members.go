package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// member is one simulated cluster: an address of its own on the loopback
// network, a CA and serving certificate of its own, and a ServiceAccount
// token of its own on the real API server behind it.
type member struct {
	index     int
	name      string // the cluster's name, and its kubeconfig's file name
	namespace string // the one namespace its identity may read
	server    int    // which real API server it forwards to
	addr      string // host:port it listens on
	caPEM     []byte
	token     string
	listener  net.Listener
	srv       *http.Server
}

// memberIP is member i's loopback address: 127.1.0.1, 127.1.0.2, ... (room
// for 16 million; the kernel routes all of 127.0.0.0/8 to the loopback
// device, so none needs configuring).
func memberIP(i int) net.IP {
	n := 1<<16 + i + 1
	return net.IPv4(127, byte(n>>16), byte(n>>8), byte(n))
}

// newMemberTLS makes a CA of the member's own and a serving certificate for
// its address signed by it. ECDSA P-256: ten thousand of them take seconds.
func newMemberTLS(name string, ip net.IP, lifetime time.Duration) (caPEM []byte, cert tls.Certificate, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, cert, err
	}
	now := time.Now().Add(-time.Minute)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + "-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(lifetime + time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, cert, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, cert, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, cert, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now,
		NotAfter:     now.Add(lifetime + time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, cert, err
	}
	cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert, nil
}

// memberRules is all a member's identity may do: read the two types the
// benchmark's controllers watch, in its own namespace. Discovery and
// /readyz are open to every authenticated user by the API server's default
// roles.
var memberRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
}

// createIdentity creates the member's namespace, its ServiceAccount, a Role
// with memberRules bound to it, and a token for it that lasts lifetime.
func createIdentity(ctx context.Context, cs kubernetes.Interface, m *member, lifetime time.Duration) error {
	ns := m.namespace
	if err := ignoreExists(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if err := ignoreExists(cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "controller"}}, metav1.CreateOptions{})); err != nil {
		return fmt.Errorf("service account in %s: %w", ns, err)
	}
	if err := ignoreExists(cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "controller"}, Rules: memberRules}, metav1.CreateOptions{})); err != nil {
		return fmt.Errorf("role in %s: %w", ns, err)
	}
	if err := ignoreExists(cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "controller"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "controller", Namespace: ns}},
	}, metav1.CreateOptions{})); err != nil {
		return fmt.Errorf("role binding in %s: %w", ns, err)
	}
	secs := int64((lifetime + time.Hour).Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "controller", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for %s: %w", ns, err)
	}
	m.token = tr.Status.Token
	return nil
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// upstream is a reverse proxy to one real API server. It presents no client
// certificate: the API server authenticates each request by the member's
// bearer token, which the proxy passes on, so every request runs as the
// member's own identity.
func upstream(cfg *rest.Config) (*httputil.ReverseProxy, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CAData) {
		return nil, errors.New("the API server's config has no CA data")
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
	}
	return &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		Transport:     tr,
		FlushInterval: -1, // watches stream
		ErrorLog:      nil,
	}, nil
}

// serve starts the member's TLS server on its address, in front of proxy.
func (m *member) serve(cert tls.Certificate, proxy http.Handler) error {
	l, err := net.Listen("tcp", net.JoinHostPort(memberIP(m.index).String(), "0"))
	if err != nil {
		return fmt.Errorf("member %s: %w", m.name, err)
	}
	m.listener, m.addr = l, l.Addr().String()
	m.srv = &http.Server{
		Handler:           proxy,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second, // the API server's
		ErrorLog:          quietLog,
	}
	go func() { _ = m.srv.ServeTLS(l, "", "") }()
	return nil
}
