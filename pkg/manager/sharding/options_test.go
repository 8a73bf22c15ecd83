package sharding

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaultsAndValidation(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Namespace != DefaultNamespace || o.Name != DefaultName || o.Weight != 1 || o.Identity == "" ||
		o.LeaseDuration != DefaultLeaseDuration || o.RenewDeadline != DefaultRenewDeadline || o.RetryPeriod != DefaultRetryPeriod {
		t.Errorf("defaults: %+v", o)
	}
	o2, _ := Options{}.withDefaults()
	if o.Identity == o2.Identity {
		t.Error("two default identities are equal")
	}
	for _, bad := range []Options{
		{Name: "Not_A_Label"},
		{Namespace: "a/b"},
		{Weight: -1},
		{LeaseDuration: 5 * time.Second, RenewDeadline: 5 * time.Second},
		{RetryPeriod: 20 * time.Second},
	} {
		if _, err := bad.withDefaults(); err == nil || !strings.Contains(err.Error(), "invalid options") {
			t.Errorf("%+v: err=%v, want invalid options", bad, err)
		}
	}
}
