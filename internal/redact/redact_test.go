package redact

import (
	"errors"
	"fmt"
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

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://10.0.0.1:6443":                         "https://10.0.0.1:6443",
		"https://admin:hunter2@10.0.0.1:6443/":          "https://[redacted]@10.0.0.1:6443/",
		"https://10.0.0.1:6443/api?token=s3cr3t&x=1":    "https://10.0.0.1:6443/api?[redacted]",
		"http://user:pw@proxy.example:3128":             "http://[redacted]@proxy.example:3128",
		"https://h/#access_token=s3cr3t":                "https://h/",
		"not a url":                                     "not a url",
		"https://bad host:pw@x/%zz?token=s3cr3t":        Placeholder,
		"https://10.0.0.1:6443/apis/apps/v1/namespaces": "https://10.0.0.1:6443/apis/apps/v1/namespaces",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStringAndErr(t *testing.T) {
	secrets := []string{"hunter2", "s3cr3t", "eyJhbGciOi.payload.sig", "QWxhZGRpbjpvcGVu"}
	in := `Get "https://admin:hunter2@10.0.0.1:6443/version?token=s3cr3t": dial tcp: refused; ` +
		`header Authorization: Bearer eyJhbGciOi.payload.sig; Basic QWxhZGRpbjpvcGVu`
	out := String(in)
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("%q survived: %s", s, out)
		}
	}
	if !strings.Contains(out, "10.0.0.1:6443/version") || !strings.Contains(out, "dial tcp: refused") {
		t.Errorf("redaction removed what is not secret: %s", out)
	}
	wrapped := fmt.Errorf("cluster %q: %w", "eu", errors.New(in))
	if got := Err(wrapped).Error(); strings.Contains(got, "hunter2") || !strings.HasPrefix(got, `cluster "eu": `) {
		t.Errorf("Err: %s", got)
	}
	sentinel := errors.New("nothing secret here")
	if got := Err(fmt.Errorf("x: %w", sentinel)); !errors.Is(got, sentinel) {
		t.Error("an error with nothing to redact no longer unwraps")
	}
	if Err(nil) != nil {
		t.Error("Err(nil) is not nil")
	}
}

// Redacting what was redacted changes nothing: an error redacted where it is
// made is redacted again where it is shown.
func TestStringIsIdempotent(t *testing.T) {
	for _, s := range []string{
		"connection refused (token=hunter2 at https://admin:secret@member.example/?token=abc)",
		"Get \"https://user:pw@10.0.0.1:6443/api?timeout=32s\": dial tcp: refused",
		"Authorization: Bearer abcdef123456 sent to https://host.example/path#frag",
	} {
		once := String(s)
		if twice := String(once); twice != once {
			t.Errorf("String(%q) = %q, then %q", s, once, twice)
		}
	}
}
