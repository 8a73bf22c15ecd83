package redact

import (
	"errors"
	"strings"
	"testing"
)

func TestRedactRemovesQuotedInput(t *testing.T) {
	data := []byte("users:\n- name: admin\n  user:\n    token: abcdefghijklmnop\n")
	err := Error(errors.New("line 4: cannot unmarshal !!str `abcdefghijklmnop` into []string"), data)
	if strings.Contains(err.Error(), "abcdefghijklmnop") {
		t.Fatalf("token not redacted: %v", err)
	}
	if !strings.Contains(err.Error(), "cannot unmarshal") {
		t.Fatalf("redaction removed the explanation: %v", err)
	}
	plain := errors.New("yaml: line 1: did not find expected node content")
	if got := Error(plain, data); got != plain {
		t.Fatalf("an error quoting nothing from the input was changed: %v", got)
	}
}
