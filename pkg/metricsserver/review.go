package metricsserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// reviewer asks the API server who a bearer token is (TokenReview) and
// whether that user may get Path (SubjectAccessReview), and keeps the
// answers for a while, as k8s.io/apiserver's delegating authenticator
// and authorizer do. It is written here rather than taken from
// k8s.io/apiserver: that module links CEL, OpenTelemetry and gRPC into
// every vipctl process, whose package initializers alone cost the
// sidecar 8.5 MiB of resident memory on every node (docs/benchmarks.md,
// issue 51).
type reviewer struct {
	client  kubernetes.Interface
	backoff wait.Backoff
	now     func() time.Time

	tokens answers[[sha256.Size]byte, tokenAnswer] // by the token's hash: no token is kept
	access answers[string, accessAnswer]           // by user (accessKey)
}

type tokenAnswer struct {
	user authenticationv1.UserInfo
	ok   bool
}

type accessAnswer struct {
	allowed bool
	reason  string
}

// answers are the API server's answers, each kept until it expires.
type answers[K comparable, A any] struct {
	mu sync.Mutex
	m  map[K]expiring[A]
}

type expiring[A any] struct {
	a       A
	expires time.Time
}

func (c *answers[K, A]) get(k K, now time.Time) (A, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e.a, ok && now.Before(e.expires)
}

// put keeps a for ttl. A full cache first drops its expired answers, and
// all of them if none has expired.
func (c *answers[K, A]) put(k K, a A, ttl time.Duration, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[K]expiring[A]{}
	}
	if len(c.m) >= maxCached {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxCached {
			clear(c.m)
		}
	}
	c.m[k] = expiring[A]{a: a, expires: now.Add(ttl)}
}

func (c *answers[K, A]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// How long a refused token is remembered; an accepted one is kept
// tokenCacheTTL, as the apiserver's delegating authenticator does.
const tokenDenyTTL = 10 * time.Second

// maxCached bounds each cache: scrapers are a handful of Prometheus
// replicas, and anyone who reaches the port may send random tokens.
const maxCached = 256

func newReviewer(client kubernetes.Interface) *reviewer {
	return &reviewer{client: client, backoff: webhookBackoff(), now: time.Now}
}

// webhookBackoff is k8s.io/apiserver's default for its own delegated
// authentication and authorization (options.DefaultAuthWebhookRetryBackoff).
func webhookBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// bearerToken is the token of an `Authorization: Bearer` header, "" when
// there is none.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticate is the user a token belongs to, ok false when the API
// server does not accept it; err when the API server could not be asked.
func (v *reviewer) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	if token == "" {
		return authenticationv1.UserInfo{}, false, nil
	}
	key := sha256.Sum256([]byte(token))
	if a, ok := v.tokens.get(key, v.now()); ok {
		return a.user, a.ok, nil
	}
	var resp *authenticationv1.TokenReview
	err := v.retry(ctx, func(ctx context.Context) (err error) {
		resp, err = v.client.AuthenticationV1().TokenReviews().Create(ctx,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return authenticationv1.UserInfo{}, false, err
	}
	a := tokenAnswer{user: resp.Status.User, ok: resp.Status.Authenticated && resp.Status.Error == ""}
	v.tokens.put(key, a, pick(a.ok, tokenCacheTTL, tokenDenyTTL), v.now())
	return a.user, a.ok, nil
}

// authorize tells whether user may get Path, and the API server's reason
// when not.
func (v *reviewer) authorize(ctx context.Context, user authenticationv1.UserInfo) (bool, string, error) {
	key := accessKey(user)
	if a, ok := v.access.get(key, v.now()); ok {
		return a.allowed, a.reason, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, vals := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(vals)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: Path, Verb: "get"},
	}}
	var resp *authorizationv1.SubjectAccessReview
	err := v.retry(ctx, func(ctx context.Context) (err error) {
		resp, err = v.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, "", err
	}
	a := accessAnswer{allowed: resp.Status.Allowed && !resp.Status.Denied, reason: resp.Status.Reason}
	v.access.put(key, a, pick(a.allowed, allowCacheTTL, denyCacheTTL), v.now())
	return a.allowed, a.reason, nil
}

// accessKey identifies a user's attributes as a SubjectAccessReview sees
// them.
func accessKey(u authenticationv1.UserInfo) string {
	var b strings.Builder
	for _, s := range append([]string{u.Username, u.UID}, u.Groups...) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(1)
		b.WriteString(k)
		for _, s := range u.Extra[k] {
			b.WriteByte(0)
			b.WriteString(s)
		}
	}
	return b.String()
}

// retry calls f, each call bounded by reviewTimeout, again after a
// transient failure (the API server unreachable, overloaded or failing)
// while the backoff lasts; a refusal (4xx but 429) is returned at once.
func (v *reviewer) retry(ctx context.Context, f func(context.Context) error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, v.backoff, func(ctx context.Context) (bool, error) {
		callCtx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		last = f(callCtx)
		switch {
		case last == nil:
			return true, nil
		case transient(last):
			return false, nil
		default:
			return false, last
		}
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return !errors.Is(err, context.Canceled)
	}
	code := status.Status().Code
	return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
}

// pick is yes when ok, else no: how long an answer is kept.
func pick(ok bool, yes, no time.Duration) time.Duration {
	if ok {
		return yes
	}
	return no
}
