package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedact: every kind of secret a bundle's files and logs may carry is
// replaced, the key and the file's shape kept; what only looks similar
// (a Secret kind, a TokenReview in a log line, a key file's path) is kept.
func TestRedact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"keepalived auth_pass",
			"vrrp_instance api {\n    authentication {\n        auth_type PASS\n        auth_pass s3cr3t!\n    }\n}\n",
			"vrrp_instance api {\n    authentication {\n        auth_type PASS\n        auth_pass <redacted>\n    }\n}\n"},
		{"keepalived data dump (SIGUSR1)",
			"   Authentication type = SIMPLE_PASSWORD\n   Password = ab cd\n   Virtual IP (1):\n",
			"   Authentication type = SIMPLE_PASSWORD\n   Password = <redacted>\n   Virtual IP (1):\n"},
		{"keepalived JSON dump",
			`[{"data":{"iname":"api_v4","auth_type":1,"auth_data":"ab cd"},"stats":{"auth_failure":0}}]`,
			`[{"data":{"iname":"api_v4","auth_type":1,"auth_data":"<redacted>"},"stats":{"auth_failure":0}}]`},
		{"FRR neighbor password",
			"router bgp 64512\n neighbor 198.51.100.1 remote-as 64512\n neighbor 198.51.100.1 password bgp-S3cret\n",
			"router bgp 64512\n neighbor 198.51.100.1 remote-as 64512\n neighbor 198.51.100.1 password <redacted>\n"},
		{"FRR key chain",
			"key chain bfd\n key 1\n  key-string Ch41n\n",
			"key chain bfd\n key 1\n  key-string <redacted>\n"},
		{"haproxy userlist and stats auth",
			"userlist admins\n    user admin password $6$abc$def\n    user ops insecure-password plain\nlisten stats\n    stats auth admin:hunter2\n",
			"userlist admins\n    user admin password <redacted>\n    user ops insecure-password <redacted>\nlisten stats\n    stats auth admin:<redacted>\n"},
		{"kubeconfig",
			"users:\n- name: admin\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    client-key-data: LS0tLS1CRUdJTg==\n    token: sha256~abcdef\n",
			"users:\n- name: admin\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    client-key-data: <redacted>\n    token: <redacted>\n"},
		{"kubeconfig auth provider",
			"    auth-provider:\n      config:\n        client-secret: 'abc'\n        id-token: eyJhbGciOi.x.y\n        refresh-token: \"r1\"\n",
			"    auth-provider:\n      config:\n        client-secret: '<redacted>'\n        id-token: <redacted>\n        refresh-token: \"<redacted>\"\n"},
		{"JSON",
			`{"user":"a","password":"p@ss","apiKey":"k","token": "t"}`,
			`{"user":"a","password":"<redacted>","apiKey":"<redacted>","token": "<redacted>"}`},
		{"bearer in a log line",
			"I1125 10:00:00 round_trippers.go:466] curl -H \"Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.x.y\" https://198.51.100.5:6443/api\n",
			"I1125 10:00:00 round_trippers.go:466] curl -H \"Authorization: Bearer <redacted>\" https://198.51.100.5:6443/api\n"},
		{"password in a URL",
			"proxy: http://user:pa55@proxy.example.test:3128/\n",
			"proxy: http://user:<redacted>@proxy.example.test:3128/\n"},
		{"private key",
			"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\nAoGBAM\n-----END EC PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
			"-----BEGIN EC PRIVATE KEY-----\n<redacted>\n-----END EC PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
		{"key=value",
			"SECRET=abc PASSWORD=def NAME=vip\n",
			"SECRET=<redacted> PASSWORD=<redacted> NAME=vip\n"},
		{"look-alikes kept",
			"kind: Secret\nmetadata:\n  name: x\nautomountServiceAccountToken: false\nE1125 TokenReview failed: timeout\nsecretName: vipctl-metrics\n",
			"kind: Secret\nmetadata:\n  name: x\nautomountServiceAccountToken: false\nE1125 TokenReview failed: timeout\nsecretName: vipctl-metrics\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := string(Bytes([]byte(tc.in)))
			if got != tc.want {
				t.Errorf("Redact:\n%s\nwant:\n%s", got, tc.want)
			}
			if again := string(Bytes([]byte(got))); again != got {
				t.Errorf("a second Redact changed it:\n%s", again)
			}
		})
	}
}

// TestRedactKeepsJSON: a redacted JSON document still parses.
func TestRedactKeepsJSON(t *testing.T) {
	t.Parallel()
	in := `{"metadata":{"name":"a"},"data":{"password":"x y","token":""}}`
	var v map[string]any
	if err := json.Unmarshal(Bytes([]byte(in)), &v); err != nil {
		t.Fatalf("%v: %s", err, Bytes([]byte(in)))
	}
	if s := string(Bytes([]byte(in))); strings.Contains(s, "x y") {
		t.Errorf("not redacted: %s", s)
	}
}
