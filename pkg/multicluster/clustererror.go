package multicluster

import (
	"errors"
	"fmt"
)

// ClusterError is an error about one cluster; its message starts with the
// cluster's name, once: cluster "name": <Err>. It is made with WithCluster,
// which every layer of this module that names a cluster goes through, so that
// a layer wrapping an error it got from another one about the same cluster
// does not name the cluster again. errors.Is and errors.As see through it.
type ClusterError struct {
	Cluster ClusterName
	Err     error
}

func (e *ClusterError) Error() string { return fmt.Sprintf("cluster %q: %v", e.Cluster, e.Err) }

func (e *ClusterError) Unwrap() error { return e.Err }

// WithCluster returns err naming the cluster name once, nil for nil. A
// *ClusterError for the same cluster at the top of err, or at the top of
// any error that err joins (errors.Join, one per subscriber that refused a
// cluster), is taken off first: the cluster is named once, in front. This is
// decided by type and name, never by the message's text; an error that names
// the cluster only in its text (fmt.Errorf("cluster %q: ...")) is named again,
// so code that names a cluster uses WithCluster.
func WithCluster(name ClusterName, err error) error {
	if err == nil {
		return nil
	}
	_, err = withoutCluster(name, err)
	return &ClusterError{Cluster: name, Err: err}
}

// withoutCluster takes the naming of name off the top of err and of the
// errors it joins, and reports whether it took any off. An error joining
// others is rebuilt with errors.Join only if one of them changed, so that
// other multi-errors keep their type. (Errors are not compared with ==: an
// error of a non-comparable type would panic.)
func withoutCluster(name ClusterName, err error) (bool, error) {
	changed := false
	for {
		ce, ok := err.(*ClusterError)
		if !ok || ce.Cluster != name || ce.Err == nil {
			break
		}
		err, changed = ce.Err, true
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return changed, err
	}
	errs := joined.Unwrap()
	out := make([]error, len(errs))
	inner := false
	for i, e := range errs {
		var c bool
		c, out[i] = withoutCluster(name, e)
		inner = inner || c
	}
	if !inner {
		return changed, err
	}
	return true, errors.Join(out...)
}
