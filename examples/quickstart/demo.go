package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// demoTimeout bounds the whole scenario.
const demoTimeout = 5 * time.Minute

// runDemo starts three control planes, writes their kubeconfigs into a
// temporary directory and runs the controller over it; then it removes one
// cluster and adds a fourth, updates a ConfigMap, and stops. It returns what
// the controller saw. Everything it started or wrote is gone when it returns,
// also when ctx is cancelled.
func runDemo(ctx context.Context, out io.Writer) (s summary, err error) {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	rep := newReporter(out)
	fmt.Fprintln(out, "multicluster-runtime quickstart: one ConfigMap controller, a local fleet, the file provider")

	dir, err := os.MkdirTemp("", "mcr-quickstart-")
	if err != nil {
		return s, err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	rep.say("starting 3 control planes (kube-apiserver + etcd)")
	started := time.Now()
	if err := testbed.ProvideAssets(); err != nil {
		return s, err
	}
	fleet, err := fleettest.Start(3, fleettest.Options{})
	if err != nil {
		return s, err
	}
	var fleets []*fleettest.Fleet
	fleets = append(fleets, fleet)
	// Stopped last, after the controller: it must not watch dead servers.
	defer func() {
		errs := make([]error, len(fleets))
		var wg sync.WaitGroup
		for i, f := range fleets {
			wg.Go(func() { errs[i] = f.Stop() })
		}
		wg.Wait()
		if stopErr := errors.Join(errs...); stopErr != nil && ctx.Err() == nil {
			err = errors.Join(err, stopErr)
		}
	}()
	for i := range 3 {
		name := fmt.Sprintf("cluster-%d", i+1)
		if err := addMember(ctx, dir, name, fleet.Config(i)); err != nil {
			return s, err
		}
	}
	rep.say("3 control planes up in %.1fs; kubeconfigs in %s", time.Since(started).Seconds(), dir)

	// The controller, as a user would run it, with the host being cluster-1.
	// It stops when the scenario ends or is interrupted, after the figures are taken.
	mctx, stopController := context.WithCancel(context.WithoutCancel(ctx))
	var controllerErr error
	controllerDone := make(chan struct{})
	go func() {
		defer close(controllerDone)
		controllerErr = runController(mctx, fleet.Config(0), file.Options{KubeconfigDirs: []string{dir}}, rep)
	}()
	defer func() {
		// Take the figures before tearing down: shutting down disengages every
		// cluster, which is not part of the story.
		s = rep.finish()
		rep.say("stopping the controller and the control planes")
		stopController()
		<-controllerDone
		if controllerErr != nil {
			err = errors.Join(err, fmt.Errorf("controller: %w", controllerErr))
		}
	}()
	step := func(what string, cond func(r *reporter) bool) error {
		return waitFor(ctx, controllerDone, rep, what, cond)
	}

	if err := step("the first three clusters", func(r *reporter) bool {
		return r.seen["cluster-1 default/welcome"] > 0 && r.seen["cluster-2 default/welcome"] > 0 && r.seen["cluster-3 default/welcome"] > 0
	}); err != nil {
		return s, err
	}

	rep.say("removing cluster-2: deleting its kubeconfig file")
	if err := os.Remove(filepath.Join(dir, "cluster-2.kubeconfig")); err != nil {
		return s, err
	}
	if err := step("cluster-2 to leave", func(r *reporter) bool { return !r.engaged["cluster-2"] }); err != nil {
		return s, err
	}
	if err := fleet.StopMember(1); err != nil {
		return s, err
	}

	rep.say("adding cluster-4: starting a control plane and writing its kubeconfig")
	extra, err := fleettest.Start(1, fleettest.Options{})
	if err != nil {
		return s, err
	}
	fleets = append(fleets, extra)
	if err := addMember(ctx, dir, "cluster-4", extra.Config(0)); err != nil {
		return s, err
	}
	if err := step("cluster-4 to join", func(r *reporter) bool { return r.seen["cluster-4 default/welcome"] > 0 }); err != nil {
		return s, err
	}

	rep.say("updating default/welcome in cluster-1")
	before := 0
	rep.check(func(r *reporter) bool { before = r.seen["cluster-1 default/welcome"]; return true })
	if err := updateWelcome(ctx, fleet.Config(0)); err != nil {
		return s, err
	}
	if err := step("the update to be reconciled", func(r *reporter) bool { return r.seen["cluster-1 default/welcome"] > before }); err != nil {
		return s, err
	}

	return s, nil // s is set on the way out
}

// addMember creates the member's welcome ConfigMap and writes its kubeconfig
// into dir the way tools should: a hidden temporary file renamed into place.
func addMember(ctx context.Context, dir, name string, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "welcome"},
		Data:       map[string]string{"greeting": "hello from " + name},
	}
	if err := c.Create(ctx, cm); err != nil {
		return fmt.Errorf("%s: creating ConfigMap: %w", name, err)
	}
	kc, err := fleettest.KubeconfigFor(cfg, name)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, kc, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name+".kubeconfig"))
}

func updateWelcome(ctx context.Context, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "welcome"}, cm); err != nil {
		return err
	}
	cm.Data["farewell"] = "bye from cluster-1"
	return c.Update(ctx, cm)
}

// waitFor polls cond until it holds, the controller stops or ctx ends.
func waitFor(ctx context.Context, controllerDone <-chan struct{}, rep *reporter, what string, cond func(r *reporter) bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if rep.check(cond) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-controllerDone:
			return fmt.Errorf("waiting for %s: the controller stopped", what)
		case <-tick.C:
		}
	}
}
