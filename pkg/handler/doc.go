// Package handler provides per-cluster event handlers. Import it as mchandler.
//
// A multi-cluster controller watches many clusters; its handlers are factories
// (TypedEventHandlerFunc) called once per engaged cluster, so each handler knows
// the cluster its events come from and the requests it enqueues carry that
// cluster's name. Lift turns any controller-runtime handler into such a factory;
// the enqueue helpers below are lifted controller-runtime handlers.
package handler
