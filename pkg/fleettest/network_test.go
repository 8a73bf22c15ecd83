package fleettest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// readyz asks /readyz of the member behind cfg's host within timeout.
func readyz(host string, timeout time.Duration) error {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(host + "/readyz")
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestFaultsCutBlackholeAndSlowAMember(t *testing.T) {
	faults := shared.Faults(1)
	t.Cleanup(faults.Restore)
	host := faults.Config().Host
	if err := readyz(host, 10*time.Second); err != nil {
		t.Fatalf("through faults, before any: %v", err)
	}

	// Cut: refused at once, not left to time out.
	faults.Cut()
	if err := readyz(host, 10*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("a cut member answered %v, want a refusal", err)
	}
	faults.Restore()
	fleettest.Eventually(t, 10*time.Second, func() error { return readyz(host, 10*time.Second) })

	// Blackhole: nothing comes back; the client gives up at its timeout.
	faults.Blackhole()
	if err := readyz(host, 500*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a black-holed member answered %v, want a timeout", err)
	}
	faults.Restore()
	fleettest.Eventually(t, 10*time.Second, func() error { return readyz(host, 10*time.Second) })

	// Slow: a request and its answer take at least twice the delay, so a
	// client waiting less gives up and one waiting more is answered.
	faults.Slow(400 * time.Millisecond)
	if err := readyz(host, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a member slowed by 400ms answered within 300ms: %v", err)
	}
	if err := readyz(host, 20*time.Second); err != nil {
		t.Fatalf("a slow member did not answer a patient client: %v", err)
	}
	faults.Restore()
	if err := readyz(host, 10*time.Second); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
}

func TestFaultsSilenceTheWatchesOpen(t *testing.T) {
	faults := shared.Faults(0)
	t.Cleanup(faults.Restore)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	through, err := client.NewWithWatch(faults.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := client.New(shared.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	label := map[string]string{"fleettest-silence": fmt.Sprint(time.Now().UnixNano())}
	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: label}}
		if err := direct.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = direct.Delete(context.Background(), cm) })
	}
	startWatch := func() watch.Interface {
		t.Helper()
		w, err := through.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace("default"), client.MatchingLabels(label))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	next := func(w watch.Interface, within time.Duration) (string, bool) {
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				return cm.Name, true
			}
			return fmt.Sprintf("%s %T", ev.Type, ev.Object), true
		case <-time.After(within):
			return "", false
		}
	}
	name := fmt.Sprintf("silence-%d", time.Now().UnixNano())
	open := startWatch()
	create(name + "-a")
	if got, ok := next(open, 30*time.Second); !ok || got != name+"-a" {
		t.Fatalf("before the silence the watch delivered %q (%v), want %s-a", got, ok, name)
	}

	faults.SilenceWatches()
	during := startWatch() // answered, and silent too
	create(name + "-b")
	// Everything but the watches is answered: /readyz, and lists.
	if err := readyz(faults.Config().Host, 10*time.Second); err != nil {
		t.Fatalf("/readyz during the silence: %v", err)
	}
	fleettest.Eventually(t, 10*time.Second, func() error {
		var l corev1.ConfigMapList
		if err := through.List(ctx, &l, client.InNamespace("default"), client.MatchingLabels(label)); err != nil {
			return err
		}
		if len(l.Items) != 2 {
			return fmt.Errorf("listed %d, want 2", len(l.Items))
		}
		return nil
	})
	for _, w := range []watch.Interface{open, during} {
		if got, ok := next(w, 2*time.Second); ok {
			t.Fatalf("a silenced watch delivered %q", got)
		}
	}

	// Restored: new watches deliver; the silenced ones stay silent.
	faults.Restore()
	after := startWatch()
	create(name + "-c")
	seen := map[string]bool{}
	for len(seen) < 3 {
		got, ok := next(after, 30*time.Second)
		if !ok {
			t.Fatalf("a watch started after Restore delivered %v, want the three ConfigMaps", seen)
		}
		seen[got] = true
	}
	if got, ok := next(open, time.Second); ok {
		t.Fatalf("a watch silenced before Restore delivered %q after it", got)
	}
}
