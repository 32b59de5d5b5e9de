//go:build tools

// Package tools pins k8s.io/kubernetes in this module's build list so that
// `go build k8s.io/kubernetes/cmd/kube-apiserver` resolves here.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver/app"
