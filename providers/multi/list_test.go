package multi

import (
	"slices"
	"testing"

	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

// The provider lists what was added and forgets what was removed.
func TestProviderNamesAndGetProvider(t *testing.T) {
	m := New(Options{})
	if names := m.ProviderNames(); len(names) != 0 {
		t.Fatalf("new provider lists %v", names)
	}
	east, west := nop.New(), nop.New()
	for prefix, p := range map[string]*nop.Provider{"west": west, "east": east} {
		if err := m.AddProvider(prefix, p); err != nil {
			t.Fatal(err)
		}
	}
	if names := m.ProviderNames(); !slices.Equal(names, []string{"east", "west"}) {
		t.Errorf("ProviderNames() = %v, want [east west]", names)
	}
	if p, ok := m.GetProvider("east"); !ok || p != east {
		t.Errorf("GetProvider(east) = %v, %v", p, ok)
	}
	m.RemoveProvider("east")
	if names := m.ProviderNames(); !slices.Equal(names, []string{"west"}) {
		t.Errorf("after removing east: ProviderNames() = %v", names)
	}
	if p, ok := m.GetProvider("east"); ok {
		t.Errorf("GetProvider(east) after removal = %v", p)
	}
}
