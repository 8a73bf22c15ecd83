package mctest

import "github.com/mcruntime/multicluster-runtime/pkg/fleettest"

// The engagement tracker and member identity helpers are the public test
// kit's; these names keep the project's own tests short.
type Tracker = fleettest.Tracker

var (
	// NewTracker returns a Tracker that has seen nothing.
	NewTracker = fleettest.NewTracker
	// MemberOf tells which member of a marked fleet a cluster talks to.
	MemberOf = fleettest.MemberOf
	// ExpectEngaged waits until exactly the given clusters are engaged, each
	// talking to the given member of a marked fleet, and returns them.
	ExpectEngaged = fleettest.ExpectEngaged
)
