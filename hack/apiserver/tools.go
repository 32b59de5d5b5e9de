//go:build tools

// Package tools pins k8s.io/kubernetes in this module's build list so that
// `go build k8s.io/kubernetes/cmd/kube-apiserver` and `.../cmd/kubelet`
// resolve here: the kubelet of the kubelet lab is the same release as the
// test apiserver.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
