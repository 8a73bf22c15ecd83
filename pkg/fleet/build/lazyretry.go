package build

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// retryTimedOut runs a discovery request, and runs it once more if it timed
// out. A member's first lookups are the discovery of the types its
// controllers watch, asked for while its caches start; on a loaded server
// (or a fleet whose members all start at once) one of them can miss its
// bound while the next answers at once, and without a second try the
// member's start fails on it (Clusters.Add gives up, a provider retries the
// whole build). One retry only: a server that times out twice is reported as
// it is, within twice the request bound.
func retryTimedOut[T any](request func() (T, error)) (T, error) {
	v, err := request()
	if err == nil || !timedOut(err) {
		return v, err
	}
	return request()
}

// timedOut reports whether err is a request that ran out of time: its
// client's or its context's deadline, or the server's own timeout.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
