package redact

import "testing"

func TestPathsAreReplacedAndURLsKept(t *testing.T) {
	for in, want := range map[string]string{
		"open /var/run/secrets/kubernetes.io/serviceaccount/token: permission denied": "open [path]: permission denied",
		`reading "/etc/fleet/kubeconfigs/east.yaml": no such file or directory`:       `reading "[path]": no such file or directory`,
		"token file (/home/op/.kube/token) unreadable":                                "token file ([path]) unreadable",
		"file=/tmp/x,other=/tmp/y":                                                    "file=[path],other=[path]",
		"/abs/at/start failed":                                                        "[path] failed",
		`Get "https://[redacted]@member.example:6443/api/v1?[redacted]": EOF`:         `Get "https://[redacted]@member.example:6443/api/v1?[redacted]": EOF`,
		"dial tcp 10.0.0.7:6443: connect: connection refused":                         "dial tcp 10.0.0.7:6443: connect: connection refused",
		"/readyz: EOF": "/readyz: EOF",
		"the server could not find /apis/example.com/v1 (get widgets)": "the server could not find /apis/example.com/v1 (get widgets)",
		"a ratio 1/2 stays": "a ratio 1/2 stays",
	} {
		if got := Paths(in); got != want {
			t.Errorf("Paths(%q) = %q, want %q", in, got, want)
		}
	}
}
