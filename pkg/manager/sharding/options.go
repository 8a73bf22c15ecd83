package sharding

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults, the same as controller-runtime's leader election.
const (
	DefaultNamespace     = "default"
	DefaultName          = "multicluster-runtime"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Options configure a Coordinator. The zero value is ready to use.
type Options struct {
	// Namespace on the host cluster that holds the Leases. Defaults to "default".
	// Every replica of one controller must use the same Namespace and Name.
	Namespace string

	// Name identifies the group of replicas that share a fleet: it prefixes the
	// Lease names and is the value of their group label, so that two different
	// controllers can shard the same fleet independently. Defaults to
	// "multicluster-runtime"; at most 63 characters, a DNS label.
	Name string

	// Identity of this replica; unique among the replicas of the group.
	// Defaults to the hostname and a random suffix, so a restarted replica is a
	// new replica to its peers (its predecessor's fences expire or are released first).
	Identity string

	// Weight of this replica: it is assigned about Weight/sum(weights) of the
	// clusters. Defaults to 1; must not be negative.
	Weight int

	// LeaseDuration is how long peers wait, from the last renewal they saw,
	// before they consider a silent replica gone and take over its clusters.
	// Defaults to 15s.
	LeaseDuration time.Duration

	// RenewDeadline is how long this replica keeps its clusters without a
	// successful renewal of its replica Lease. When it passes, every fenced
	// context ends and Owns reports false. It must be shorter than
	// LeaseDuration; the difference is the time the engine has to stop a
	// cluster before a peer may take it over. Defaults to 10s.
	RenewDeadline time.Duration

	// RetryPeriod is the interval between renewals of the replica Lease.
	// Defaults to 2s.
	RetryPeriod time.Duration

	// Logger receives hand-offs, fence losses and renewal failures. Defaults to
	// controller-runtime's logger named "sharding".
	Logger *logr.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return o, fmt.Errorf("sharding: no Identity given and the hostname is unknown: %w", err)
		}
		o.Identity = host + "_" + randomHex(4)
	}
	if o.Weight == 0 {
		o.Weight = 1
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	var errs []error
	for _, msg := range validation.IsDNS1123Label(o.Name) {
		errs = append(errs, fmt.Errorf("option Name %q: %s", o.Name, msg))
	}
	for _, msg := range validation.IsDNS1123Label(o.Namespace) {
		errs = append(errs, fmt.Errorf("option Namespace %q: %s", o.Namespace, msg))
	}
	if o.Weight < 0 {
		errs = append(errs, fmt.Errorf("option Weight %d is negative", o.Weight))
	}
	if o.RenewDeadline >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("option RenewDeadline %s must be shorter than LeaseDuration %s", o.RenewDeadline, o.LeaseDuration))
	}
	if o.RetryPeriod <= 0 || o.RetryPeriod >= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("option RetryPeriod %s must be positive and shorter than RenewDeadline %s", o.RetryPeriod, o.RenewDeadline))
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("sharding: invalid options: %w", err)
	}
	return o, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
