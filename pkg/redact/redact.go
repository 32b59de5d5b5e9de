// Package redact hides credentials in text vipctl passes on (a support
// bundle's files and logs, a daemon's complaint in an Event): one list of
// the words that introduce a secret, used by every such place.
package redact

import (
	"regexp"
	"strings"
)

// Redacted replaces every secret value.
const Redacted = "<redacted>"

// Words are the words that introduce a secret in the files and logs
// vipctl passes on, as a regexp alternation: keepalived's auth_pass (and
// auth_data, its name in keepalived's JSON dump), FRR's `neighbor … password`,
// haproxy's userlist passwords, a kubeconfig's client-key-data, token and
// auth-provider secrets, a Bearer header in a log line, and the usual
// names of keys and secrets in YAML, JSON and key=value text.
const Words = `auth_pass|auth_data|password|passwd|insecure-password|secret|client-secret|client_secret|` +
	`token|id-token|refresh-token|access-token|access_token|bearer|client-key-data|` +
	`key-string|private-key|private_key|api-key|api_key|apikey`

var (
	// keyValue: a secret key (a whole word: after the line's start, a
	// blank, a quote, '{' or ','), an optional closing quote, then ':',
	// '=' or blanks, then the value (quoted or up to a blank, quote,
	// comma or brace). Blanks never span a line, so `kind: Secret` does
	// not take the next line's first word for its value.
	keyValue = regexp.MustCompile(`(?im)((?:^|[\s"'{,])(?:` + Words + `)["']?[ \t]*(?:[:=][ \t]*|[ \t]+))("[^"\n]*"|'[^'\n]*'|[^\s"',}]+)`)
	// wholeLine: `key = value`, blanks around the '=', as keepalived's
	// data dump (SIGUSR1) writes its settings; the value runs to the
	// line's end, so a quoted auth_pass with a blank in it ("Password =
	// ab cd") goes whole, not up to its first blank.
	wholeLine = regexp.MustCompile(`(?im)^([ \t]*(?:` + Words + `)[ \t]+=[ \t]+)(\S(?:.*\S)?)`)
	// privateKey: a PEM private key of any kind, kept as a marker.
	privateKey = regexp.MustCompile(`(?s)(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----).*?(-----END [A-Z0-9 ]*PRIVATE KEY-----)`)
	// statsAuth: haproxy's `stats auth USER:PASSWORD`.
	statsAuth = regexp.MustCompile(`(?im)(\bstats[ \t]+auth[ \t]+[^\s:]+:)(\S+)`)
	// urlPassword: the password of scheme://user:password@host.
	urlPassword = regexp.MustCompile(`(://[^/\s:@]+:)([^@\s/]+)(@)`)
)

// Bytes replaces every secret value in data with Redacted, keeping the
// key and a value's quotes, so the file still reads (and parses) as
// before. Applying it again changes nothing.
func Bytes(data []byte) []byte {
	s := string(data)
	s = privateKey.ReplaceAllString(s, "$1\n"+Redacted+"\n$2")
	for _, re := range []*regexp.Regexp{wholeLine, keyValue} {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			value := sub[2]
			if q := value[:1]; (q == `"` || q == `'`) && strings.HasSuffix(value, q) && len(value) >= 2 {
				return sub[1] + q + Redacted + q
			}
			return sub[1] + Redacted
		})
	}
	s = statsAuth.ReplaceAllString(s, "${1}"+Redacted)
	s = urlPassword.ReplaceAllString(s, "${1}"+Redacted+"${3}")
	return []byte(s)
}
