#!/usr/bin/env bash
# Installs the real daemons and tools the tests drive: keepalived, haproxy,
# iproute2 (ip netns, veth, bridge), nftables, FRR (bgpd, zebra, vtysh)
# for BGP pools, BIRD 2 (a second BGP router), containerd and runc, bind9 (a DNS server for dns check) and
# the CNI plugins. Idempotent: apt runs only when something
# is missing, so a warm machine pays nothing.
set -euo pipefail

declare -A pkg_for=(
  [keepalived]=keepalived
  [haproxy]=haproxy
  [ip]=iproute2
  # nft: the lab dumps each node's ruleset when a test fails (vipctl itself
  # talks to nftables over netlink).
  [nft]=nftables
  # vtysh: BGP pools render a frr.conf that FRR itself judges (vtysh -C)
  # and the BGP lab runs bgpd + zebra as the nodes and the upstream router.
  [vtysh]=frr
  # bird: a second BGP implementation as the upstream router, so that the
  # nodes' FRR sessions are proven against more than FRR (TestBGPMD5Bird).
  [bird]=bird2
  # The kubelet lab (test/kubeletlab) runs the static pods in a real
  # container runtime: containerd (with ctr) and runc.
  [containerd]=containerd
  [runc]=runc
  # TestRelease mirrors the release's image archive with skopeo, as
  # docs/image.md tells users to.
  [skopeo]=skopeo
  # promtool unit-tests the rendered PrometheusRule (promtool test rules);
  # TestMetricsEndpointsAuthorizeScrapers runs prometheus itself.
  [promtool]=prometheus
  # TestDNSCheck serves the records vipctl render writes from a real DNS
  # server (named) for vipctl dns check; named-checkzone (bind9-utils, a
  # dependency) judges the zone snippet.
  [named]=bind9
  # setpriv: pkg/frr's test runs PrepareRun as the frr container does,
  # root without CAP_DAC_OVERRIDE.
  [setpriv]=util-linux
  # The cluster lab's rolling upgrade records the resets and ICMP errors
  # its client receives, to name who refused a failed request.
  [tcpdump]=tcpdump
  # ... and every node's new connections (conntrack -E), to tell whether
  # kube-proxy's DNAT took a SYN that a node's own stack refused.
  [conntrack]=conntrack
)

missing=()
for cmd in "${!pkg_for[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${pkg_for[$cmd]}")
done
# frr-reload.py (the diff-and-apply reload the sidecar runs) ships apart from
# frr itself.
[ -x /usr/lib/frr/frr-reload.py ] || missing+=(frr-pythontools)
# The cluster lab's pods get their network from the CNI plugins (bridge,
# host-local, loopback, portmap), which are not on PATH.
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
# keepalived refuses track/notify scripts unless their user exists (pitfall 4
# in the lab notes): the rendered configs run scripts as keepalived_script.
need_user=0
id keepalived_script >/dev/null 2>&1 || need_user=1

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing ${missing[*]} and not root; install them or rerun as root" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # No package's service may start in the host's namespace while it is
  # installed (named would answer on every host address): invoke-rc.d asks
  # policy-rc.d, and 101 means "not now". Only a policy of our own is
  # removed again.
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ "$own_policy" = 1 ]; then
    rm -f /usr/sbin/policy-rc.d
    trap - EXIT
  fi
fi
if [ "$need_user" = 1 ] && [ "$(id -u)" = 0 ]; then
  useradd --system --no-create-home --shell /usr/sbin/nologin keepalived_script
fi
# Debian starts the packaged services on install; the tests run their own
# instances inside network namespaces and never want the host's.
if [ ${#missing[@]} -gt 0 ] && command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now keepalived haproxy frr bird containerd named prometheus >/dev/null 2>&1 || true
fi
# Without systemd the package's init script may still have started FRR in
# the host namespace: keep it from starting at boot and stop it by its own
# pid files (watchfrr first, or it restarts the others), never by name.
if [ "$(id -u)" = 0 ]; then
  for service in frr bird named; do
    if [ -x /etc/init.d/$service ] && command -v update-rc.d >/dev/null 2>&1; then
      update-rc.d $service disable >/dev/null 2>&1 || true
    fi
  done
  for pidfile in /run/frr/watchfrr.pid /run/frr/zebra.pid /run/frr/bgpd.pid /run/frr/staticd.pid /run/frr/mgmtd.pid /run/bird/bird.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
fi
keepalived --version 2>&1 | sed -n 1p
haproxy -v | sed -n 1p
/usr/lib/frr/bgpd --version 2>&1 | sed -n 1p
bird --version 2>&1 | sed -n 1p
named -v
