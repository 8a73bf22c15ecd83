package multi_test

import (
	"fmt"

	"github.com/mcruntime/multicluster-runtime/providers/multi"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

func ExampleProvider_ProviderNames() {
	p := multi.New(multi.Options{})
	_ = p.AddProvider("kind", nop.New())
	_ = p.AddProvider("capi", nop.New())
	fmt.Println(p.ProviderNames())
	// Output: [capi kind]
}
