# Thin on purpose: every recipe is a one-liner or a script under hack/.
SHELL := /usr/bin/env bash
# pipefail: a benchmark that fails must fail its make target, even when
# its output is filtered through grep.
.SHELLFLAGS := -o pipefail -c
GO ?= go
# Read before the default below: make release takes a VERSION given on the
# command line or in the environment, and otherwise the tree's own.
GIVEN_VERSION := $(if $(filter-out undefined,$(origin VERSION)),$(VERSION))
# The tree's version from the file VERSION and hack/releases.txt, no git
# tags needed: VERSION at the release commit, v0.1.0-N-gHASH[-dirty] after
# it (hack/releaseversion). Expanded once: bin/vipctl and the image tag
# must name the same version, also when a commit lands between the two
# steps of one make run.
VERSION ?= $(or $(shell $(GO) run ./hack/releaseversion),$(error cannot name this tree's version: go run ./hack/releaseversion says why))
VERSION := $(VERSION)
# The architecture build and image build for, in Go's names (amd64,
# arm64); make image ARCH=arm64 on an amd64 machine runs the packages'
# maintainer scripts under qemu-user-static (hack/install-image-tools.sh).
# Another architecture than the machine's writes files of its own
# (bin/vipctl-arm64, bin/vipctl-image-arm64.tar): bin/vipctl and
# bin/vipctl-image.tar stay the machine's, which the labs run.
HOSTARCH := $(shell $(GO) env GOARCH)
ARCH ?= $(HOSTARCH)
ARCH_SUFFIX := $(if $(filter $(HOSTARCH),$(ARCH)),,-$(ARCH))
# Where build and image write; make release points them into its directory.
VIPCTL_BIN ?= bin/vipctl$(ARCH_SUFFIX)
VIPCTL_IMAGE ?= bin/vipctl-image$(ARCH_SUFFIX).tar
# make release: DEV=1 builds a development release (any commit, changes
# allowed); RELEASE_DIR defaults to bin/release/VERSION.
DEV ?=
RELEASE_DIR ?=
# -s -w: no symbol table or DWARF (panics still print stack traces);
# CGO_ENABLED=0: static, no libc mapped. The binary's own pages are more
# than half of the sidecar's resident set on every node (docs/benchmarks.md).
LDFLAGS := -s -w -X github.com/vipctl/vipctl/pkg/version.Version=$(VERSION)
EXAMPLE ?= examples/compact-ipv4.yaml
NODES ?= examples/nodes/compact.yaml
OUT ?= out
TRIALS ?= 20
# Each kubelet-lab trial boots three nodes (about a minute).
KUBELET_TRIALS ?= 3
CLUSTER_TRIALS ?= 3

.PHONY: all build image previous-image release release-verify demo deps test test-unit test-e2e fuzz lint verify update bench bench-failover bench-peers bench-peers-scale bench-announce bench-steady bench-runtimecfg bench-scale lab-up lab-down clean

all: build

build:
	CGO_ENABLED=0 GOARCH=$(ARCH) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(VIPCTL_BIN) ./cmd/vipctl

## image: vipctl's one container image (keepalived, haproxy, FRR from
## Debian's packages and bin/vipctl) as an OCI archive, bin/vipctl-image.tar,
## tagged $(VERSION), for ARCH (every ELF file in it checked to be ARCH's);
## cached, rebuilt only when its inputs change
image: build
	./hack/install-image-tools.sh $(ARCH)
	./hack/build-image.sh $(VERSION) $(VIPCTL_BIN) $(VIPCTL_IMAGE) $(ARCH)

## previous-image: the release this tree follows (the newest hack/releases.txt
## records), its vipctl and image built from this clone's git history by that
## release's own make targets, in bin/previous/COMMIT/ (the cluster lab's
## upgrade from it and rollback to it; docs/upgrade.md); cached
previous-image:
	./hack/build-previous-image.sh

## release: bin/release/VERSION/ with the static vipctl and the image (an
## OCI archive) for each of ARCHES, both images under one index, the SBOM
## and SHA256SUMS (docs/image.md); the tree must be clean and at the release
## commit (the one that sets the file VERSION); DEV=1 for a development
## build of any tree
ARCHES ?= amd64 arm64
release:
	DEV='$(DEV)' GIVEN_VERSION='$(GIVEN_VERSION)' DEV_VERSION='$(VERSION)' RELEASE_DIR='$(RELEASE_DIR)' ARCHES='$(ARCHES)' ./hack/release.sh

## release-verify: a release directory as it will be published: SHA256SUMS
## names every file and matches, every ELF file of every image is its
## architecture's; prints the archives' digests (the index's is what the
## release workflow pushes and signs)
release-verify:
	./hack/release-verify.sh $(or $(RELEASE_DIR),bin/release/$(VERSION))

## demo: run vipctl on the shipped example into ./out
demo: build
	./hack/demo.sh bin/vipctl $(EXAMPLE) $(NODES) $(OUT)

## deps: install keepalived, haproxy, iproute2, containerd, runc and the
## CNI plugins when missing; build the test control plane (kube-apiserver,
## etcd), the kubelet lab's kubelet and the cluster lab's
## kube-controller-manager, kube-scheduler and kube-proxy from source into
## bin/, cached
deps:
	./hack/install-deps.sh
	./hack/build-apiserver.sh
	./hack/build-kubelet.sh
	./hack/build-cluster.sh

## test: every test, unit and end to end, after installing what they need,
## and a few seconds of each fuzz target
# hack/test.sh runs the suites (docs/lab.md, "Suites"): the unit tests
# and test/e2e (the namespace lab) in two halves side by side, then the
# kubelet, cluster and guides suites one at a time; hack/testreport
# prints what go test would and ends with the failed tests' first error
# lines and the slowest tests (CI shows only the end); every test's and
# subtest's span goes to bin/test-times.tsv.
TESTREPORT = $(GO) run ./hack/testreport -times bin/test-times.tsv $(if $(filter -v,$(GOFLAGS)),-v)
test: deps image previous-image verify
	GO=$(GO) ./hack/test.sh
	./hack/fuzz.sh 3s

## fuzz: each fuzz target for FUZZTIME (decode+validate+render, the
## sidecar's reading of cluster objects); a sample of the rendered configs
## is judged by the real keepalived and haproxy (root, network namespaces)
FUZZTIME ?= 2m
fuzz:
	VIPCTL_FUZZ_DAEMONS=1 ./hack/fuzz.sh $(FUZZTIME)

## lab-up: start the cluster lab (docs/lab.md: three control-plane nodes
## and a worker under real kubelets, vipctl installed as a user installs
## it) in the background for a demo, held for LAB_HOLD; root
## lab-down: tear it down
LAB_HOLD ?= 8h
lab-up: deps image
	./hack/lab.sh up $(LAB_HOLD)

lab-down:
	./hack/lab.sh down

test-unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/e2e)

test-e2e: deps image previous-image
	$(GO) test -json -count=1 -p 1 -parallel 4 -timeout 55m ./test/e2e/... 2>&1 | $(TESTREPORT)

lint:
	./hack/lint.sh

## verify: formatting, vet, and that generated files are current
verify:
	./hack/verify.sh

## update: regenerate golden files and generated docs
update:
	./hack/update.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

## bench-failover: failover outages in the namespace lab (root), TRIALS per case;
## VRRP (BenchmarkFailover), bgp pools over FRR (BenchmarkFailoverBGP,
## mode=bgp lines) and the kubelet lab (BenchmarkFailoverKubelet,
## lab=kubelet lines), KUBELET_TRIALS per case, and the cluster lab
## (BenchmarkFailoverCluster, lab=cluster lines), CLUSTER_TRIALS per case;
## TRIALS=0 or KUBELET_TRIALS=0 leaves that lab out. BENCH_ARGS narrows or varies
## it: -profiles=fast -scenarios=node-loss -advert=100ms
BENCH_ARGS ?=
bench-failover: deps image
	$(GO) test -run '^$$' -bench BenchmarkFailover -benchtime 1x -timeout 3h ./test/e2e/ -args -trials=$(TRIALS) $(BENCH_ARGS) | grep '^failover '
	$(GO) test -run '^$$' -bench BenchmarkFailoverKubelet -benchtime 1x -timeout 3h ./test/e2e/kubelet/ -args -kubelet-trials=$(KUBELET_TRIALS) $(BENCH_ARGS) | grep '^failover '
	$(GO) test -run '^$$' -bench BenchmarkFailoverCluster -benchtime 1x -timeout 3h ./test/e2e/cluster/ -args -cluster-trials=$(CLUSTER_TRIALS) $(BENCH_ARGS) | grep '^failover '

## bench-peers: vipctl and its peers (hack/peers.env: kube-vip, MetalLB) side by
## side, the same three nodes, client and faults, PEER_TRIALS per case
## (BenchmarkPeers: peers lines, kept in bin/peers.txt, and their chart
## bin/peers.svg drawn by hack/peerschart; root)
PEER_TRIALS ?= 5
bench-peers: deps image
	./hack/build-peers.sh
	$(GO) test -run '^$$' -bench '^BenchmarkPeers$$' -benchtime 1x -timeout 3h ./test/e2e/ -args -peer-trials=$(PEER_TRIALS) | grep '^peers ' | tee bin/peers.txt
	$(GO) run ./hack/peerschart -o bin/peers.svg -title "vipctl $$(git describe --always --dirty) and its peers, $$(date -u +%F) (make bench-peers)" < bin/peers.txt

## bench-peers-scale: vipctl, kube-vip and MetalLB with PEER_SERVICES
## Services loaded in the peers' lab, each part of vipctl a process of its
## own as in its pods (BenchmarkPeersScale, peers-scale lines; root;
## PEERS=vipctl,metallb to leave one out, vipctl-default for vipctl with
## its default profile, vipctl-pools for the pool alone (poolsOnly),
## vipctl-pools-default for both; kube-vip-global for kube-vip's one
## election for all Services, kube-vip for one per Service; PEER_SCALE_FLAGS for the benchmark's
## other flags, e.g. '-peer-scale-steady=10m -peer-scale-settle=6m
## -peer-scale-adds=100', -peer-scale-profile=DIR for CPU profiles of
## vipctl's sidecars over the CPU window, and -peer-scale-trace=DIR for the
## node loss's announcements per lost address and every agent's log)
PEER_SERVICES ?= 1000
PEERS ?= vipctl,kube-vip-global,kube-vip,metallb
PEER_SCALE_FLAGS ?=
bench-peers-scale: deps image
	./hack/build-peers.sh
	$(GO) test -run '^$$' -bench BenchmarkPeersScale -benchtime 1x -timeout 2h ./test/e2e/ -args -peer-scale-services=$(PEER_SERVICES) -peer-scale-peers=$(PEERS) $(PEER_SCALE_FLAGS) | grep '^peers-scale '

## bench-announce: announce: keepalived against announce: sidecar on a small pool
## (two nodes, IPv4 and IPv6, real keepalived, apiserver and sidecars), per fault:
## node loss, keepalived killed, the sidecar crashed, the sidecar down during a node
## loss, a drain, cold starts with and without the API; ANNOUNCE_TRIALS per case,
## the modes interleaved; then the kubelet lab (BenchmarkAnnounceKubelet,
## KUBELET_TRIALS per case). BENCH_ARGS narrows it: -announce-faults=node-loss
ANNOUNCE_TRIALS ?= 5
bench-announce: deps image
	$(GO) test -run '^$$' -bench BenchmarkAnnounce -benchtime 1x -timeout 4h ./test/e2e/ -args -announce-trials=$(ANNOUNCE_TRIALS) $(BENCH_ARGS) | grep '^announce '
	$(GO) test -run '^$$' -bench BenchmarkAnnounceKubelet -benchtime 1x -timeout 4h ./test/e2e/kubelet/ -args -kubelet-trials=$(KUBELET_TRIALS) $(BENCH_ARGS) | grep '^announce '

## bench-runtimecfg: 2000 Nodes and 5000 LoadBalancer Services in the real apiserver,
## the allocator and one sidecar as processes; Service created -> VIP in keepalived.conf,
## then the sidecar's CPU while Node statuses and EndpointSlices churn for CHURN
CHURN ?= 3m
bench-runtimecfg: deps build
	$(GO) test -run '^$$' -bench BenchmarkRuntimecfg -benchtime 1x -timeout 1h ./test/e2e/ -args -vipctl=$(CURDIR)/bin/vipctl -bench-churn=$(CHURN) | grep '^runtimecfg '

## bench-scale: 5000 LoadBalancer Services on three lab nodes with the real apiserver,
## allocator, sidecars and keepalived: adding one, reloads, node loss (issue 17), the pool
## announced by the sidecar; SCALE_ARGS=-scale-announce=keepalived measures keepalived's
## own (which does not settle at 5000: docs/benchmarks.md)
SCALE_ARGS ?=
bench-scale: deps
	$(GO) test -run '^$$' -bench BenchmarkScale -benchtime 1x -timeout 2h ./test/e2e/ -args $(SCALE_ARGS) | grep '^scale '

## bench-steady: fast profile for STEADY (10m) with both CPUs busy; counts false failovers
STEADY ?= 10m
bench-steady: deps
	$(GO) test -run '^$$' -bench BenchmarkSteadyState -benchtime 1x -timeout 1h ./test/e2e/ -args -steady=$(STEADY) $(BENCH_ARGS) | grep '^steady '

clean:
	rm -rf bin $(OUT)
