package testfleet

import (
	"context"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestTwoControlPlanesAreIndependent(t *testing.T) {
	f := New(t, 2)
	ctx := context.Background()

	a, err := client.New(f.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.New(f.Config(1), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "only-in-a"}}
	if err := a.Create(ctx, cm); err != nil {
		t.Fatalf("create in member 0: %v", err)
	}
	if err := a.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("member 0 does not serve its own object: %v", err)
	}
	err = b.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("member 1 should not see member 0's object, got err=%v", err)
	}
}

func TestStopMemberMakesItUnreachable(t *testing.T) {
	f := New(t, 1)
	c, err := client.New(f.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.StopMember(0); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &corev1.NamespaceList{}); err == nil {
		t.Fatal("a stopped member still answered")
	}
}
