package metricsserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeReviews answers TokenReviews (token "good" is system:serviceaccount:
// monitoring:prometheus) and SubjectAccessReviews (allowed for that user
// on get /metrics), after failing the first failures calls with err.
type fakeReviews struct {
	tokenCalls, accessCalls int
	failures                int
	err                     error
	lastSAR                 authorizationv1.SubjectAccessReviewSpec
}

const promUser = "system:serviceaccount:monitoring:prometheus"

func (f *fakeReviews) reviewer() (*reviewer, *time.Time) {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenCalls++
		if f.failures > 0 {
			f.failures--
			return true, nil, f.err
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "good":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: promUser, Groups: []string{"system:serviceaccounts"}}}
		case "curious":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: "curious", Groups: []string{"g"}, Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.accessCalls++
		if f.failures > 0 {
			f.failures--
			return true, nil, f.err
		}
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		f.lastSAR = sar.Spec
		n := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == promUser && n != nil && n.Path == Path && n.Verb == "get"
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC policy matched"
		}
		return true, sar, nil
	})
	v := newReviewer(c)
	v.backoff = wait.Backoff{Steps: 3}
	now := time.Unix(1_800_000_000, 0)
	v.now = func() time.Time { return now }
	return v, &now
}

// TestServeHTTPAsksTheAPIServer: a scrape's answer from the TokenReview
// and SubjectAccessReview, as TestMetricsEndpointsAuthorizeScrapers
// holds the real apiserver to.
func TestServeHTTPAsksTheAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		failures     int
		err          error
		want         int
	}{
		{"no token", "", 0, nil, http.StatusUnauthorized},
		{"not bearer", "Basic Z29vZA==", 0, nil, http.StatusUnauthorized},
		{"unknown token", "Bearer bad", 0, nil, http.StatusUnauthorized},
		{"allowed", "Bearer good", 0, nil, http.StatusOK},
		{"allowed, scheme in lower case", "bearer  good ", 0, nil, http.StatusOK},
		{"API server failing twice", "Bearer good", 2, apierrors.NewInternalError(fmt.Errorf("etcd")), http.StatusOK},
		{"API server refusing the review", "Bearer good", 1, apierrors.NewForbidden(authenticationv1.Resource("tokenreviews"), "", fmt.Errorf("no")), http.StatusUnauthorized},
		{"API server failing throughout", "Bearer good", 10, apierrors.NewServiceUnavailable("down"), http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeReviews{failures: tc.failures, err: tc.err}
			v, _ := f.reviewer()
			s := &Server{review: v, log: discard(), h: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprint(w, "metrics") })}
			r := httptest.NewRequest(http.MethodGet, Path, nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("%d %q, want %d", w.Code, w.Body.String(), tc.want)
			}
		})
	}
}

// TestServeHTTPForbidsOtherUsers: a user the API server does not allow
// gets 403 naming the path; the review asked for get on /metrics as the
// token's user, with its groups and extra.
func TestServeHTTPForbidsOtherUsers(t *testing.T) {
	f := &fakeReviews{}
	v, _ := f.reviewer()
	s := &Server{review: v, log: discard(), h: http.NotFoundHandler()}
	r := httptest.NewRequest(http.MethodGet, Path, nil)
	r.Header.Set("Authorization", "Bearer curious")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `user "curious" may not get /metrics`) {
		t.Errorf("%d %q, want 403 naming the user and /metrics", w.Code, w.Body.String())
	}
	want := authorizationv1.SubjectAccessReviewSpec{User: "curious", Groups: []string{"g"}, Extra: map[string]authorizationv1.ExtraValue{"k": {"v"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: Path, Verb: "get"}}
	if !reflect.DeepEqual(f.lastSAR, want) {
		t.Errorf("review asked %+v, want %+v", f.lastSAR, want)
	}
}

// TestReviewerCaches: answers are reused for as long as the apiserver's
// delegating authenticator and authorizer would (an accepted token and an
// allowed user two minutes, a refusal ten seconds), then asked again.
func TestReviewerCaches(t *testing.T) {
	f := &fakeReviews{}
	v, now := f.reviewer()
	ctx := context.Background()
	ask := func(token string) {
		t.Helper()
		u, ok, err := v.authenticate(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if _, _, err := v.authorize(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, step := range []struct {
		token               string
		advance             time.Duration
		wantToken, wantSARs int
	}{
		{"good", 0, 1, 1},
		{"good", time.Minute, 1, 1},
		{"bad", 0, 2, 1},
		{"bad", 9 * time.Second, 2, 1},
		{"bad", 2 * time.Second, 3, 1},
		{"good", 61 * time.Second, 4, 2},
	} {
		*now = now.Add(step.advance)
		ask(step.token)
		if f.tokenCalls != step.wantToken || f.accessCalls != step.wantSARs {
			t.Fatalf("after %q at +%s: %d TokenReviews, %d SubjectAccessReviews; want %d, %d",
				step.token, step.advance, f.tokenCalls, f.accessCalls, step.wantToken, step.wantSARs)
		}
	}
}

// TestReviewerCacheBounded: random tokens do not grow the cache past
// maxCached.
func TestReviewerCacheBounded(t *testing.T) {
	f := &fakeReviews{}
	v, _ := f.reviewer()
	for i := range 3 * maxCached {
		if _, _, err := v.authenticate(context.Background(), fmt.Sprint("random-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.tokens.len(); n > maxCached {
		t.Errorf("%d tokens cached, want at most %d", n, maxCached)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestVipctlLinksNoAPIServer: the vipctl binary does not link
// k8s.io/apiserver, nor what it brings (CEL, OpenTelemetry, gRPC): their
// package initializers cost every vipctl process, the sidecar on every
// node among them, 8.5 MiB of resident memory before it does anything
// (docs/benchmarks.md, issue 51).
func TestVipctlLinksNoAPIServer(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("no go command: the test lists the binary's dependencies with go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/vipctl/vipctl/cmd/vipctl").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, heavy := range []string{"k8s.io/apiserver/", "github.com/google/cel-go/", "go.opentelemetry.io/", "google.golang.org/grpc"} {
			if strings.HasPrefix(p, heavy) {
				t.Errorf("vipctl links %s", p)
			}
		}
	}
}
