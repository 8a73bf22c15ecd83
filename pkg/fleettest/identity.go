package fleettest

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IdentityConfigMap is the ConfigMap MarkMembers creates in namespace
// "default" of every member; its data key "member" holds the member's index.
const IdentityConfigMap = "identity"

// MarkMembers creates the identity ConfigMap in every member, so that a test
// can tell which control plane a client or cluster talks to.
func (f *Fleet) MarkMembers() error {
	for i := range f.Len() {
		c, err := client.New(f.Config(i), client.Options{})
		if err == nil {
			err = c.Create(context.Background(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: IdentityConfigMap},
				Data:       map[string]string{"member": strconv.Itoa(i)},
			})
		}
		if err != nil {
			return fmt.Errorf("fleettest: marking member %d: %w", i, err)
		}
	}
	return nil
}
