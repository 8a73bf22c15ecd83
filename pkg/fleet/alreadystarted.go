package fleet

import (
	"errors"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// AlreadyStarted reports whether err is what a cluster's Start returns when
// the cluster runs already: the application started it itself, as upstream's
// examples do with the cluster they hand to a provider. Such a cluster is used
// as it is.
//
// Clusters of this module answer with multicluster.ErrAlreadyStarted, matched
// by identity. controller-runtime's clusters answer with an error that has no
// identity to match, so its exact text is recognised too, and nothing else.
func AlreadyStarted(err error) bool {
	return errors.Is(err, multicluster.ErrAlreadyStarted) || controllerRuntimeAlreadyStarted(err)
}

// controllerRuntimeAlreadyStarted recognises controller-runtime's answer to a
// second Start (v0.25): a cluster's Start is its cache's, whose informers
// return errors.New("informer already started") (pkg/cache/internal), which
// the multi-namespace cache wraps with %w; a manager handed over as a cluster
// returns errors.New("manager already started"). controller-runtime exports
// no sentinel for either, so the text is all there is: it is compared whole,
// at each level of the chain, never searched for. TestAlreadyStartedMatchesByIdentity
// starts real clusters twice, so an upgrade that changes the text fails there.
func controllerRuntimeAlreadyStarted(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		switch err.Error() {
		case "informer already started", "manager already started":
			return true
		}
	}
	return false
}
