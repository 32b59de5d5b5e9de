#!/usr/bin/env bash
# Captures pkg/hostfirewall's fixtures: `nft -j list ruleset` of real
# rulesets, each made in a network namespace of its own (interface ens3,
# 198.51.100.9/24), never the host's. Needs root, nft, iptables-nft and
# firewalld (apt-get install firewalld; it need not run on the host).
#
# firewalld runs inside the namespace with a D-Bus system bus of its own,
# in a mount namespace where /run/dbus, /run/firewalld, /etc/firewalld
# (a copy) and /var/log are private: nothing of the host's firewalld
# configuration is read or changed. Every process it starts is stopped by
# PID and the namespace deleted at the end.
#
#   hack/capture-rulesets.sh [OUTDIR]   (default pkg/hostfirewall/testdata)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath "${1:-pkg/hostfirewall/testdata}")
src=$(realpath pkg/hostfirewall/testdata/src)
ns=vipctl-fwcap-$$
work=$(mktemp -d)
cleanup() {
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns"
ip -n "$ns" link add ens3 type veth peer name peer0
ip -n "$ns" addr add 198.51.100.9/24 dev ens3
ip -n "$ns" link set ens3 up
ip -n "$ns" link set peer0 up
ip -n "$ns" link set lo up
in_ns() { ip netns exec "$ns" "$@"; }
capture() { in_ns nft -j list ruleset >"$out/$1"; echo "captured $1"; }

# firewalld's own rulesets, one per zone setup.
cat >"$work/firewalld.sh" <<'INNER'
set -euo pipefail
out=$1 work=$2
mount -t tmpfs tmpfs /run/dbus
mkdir -p /run/firewalld && mount -t tmpfs tmpfs /run/firewalld
mkdir -p "$work/etc" "$work/log" && cp -a /etc/firewalld/. "$work/etc/"
mount --bind "$work/etc" /etc/firewalld
mount --bind "$work/log" /var/log
dbus-daemon --system --fork --nopidfile
firewalld --nofork --nopid >"$work/log/firewalld.out" 2>&1 &
for _ in $(seq 1 60); do firewall-cmd --state >/dev/null 2>&1 && break; sleep 0.5; done
firewall-cmd --state
cap() { nft -j list ruleset >"$out/$1"; echo "captured $1"; }
cap firewalld-public.json                      # defaults: ens3 in no zone, so in public
firewall-cmd -q --add-protocol=vrrp
cap firewalld-public-vrrp.json
firewall-cmd -q --remove-protocol=vrrp
firewall-cmd -q --zone=drop --change-interface=ens3
cap firewalld-drop-zone.json
firewall-cmd -q --zone=drop --add-protocol=vrrp
cap firewalld-drop-zone-vrrp.json
firewall-cmd -q --zone=drop --remove-protocol=vrrp
firewall-cmd -q --zone=trusted --change-interface=ens3
cap firewalld-trusted.json
firewall-cmd -q --zone=public --change-interface=ens3
firewall-cmd -q --add-rich-rule='rule family=ipv4 source address=198.51.100.0/24 protocol value=vrrp accept'
cap firewalld-rich-vrrp.json
INNER
in_ns unshare -m --propagation private bash "$work/firewalld.sh" "$out" "$work"
for pid in $(ip netns pids "$ns"); do kill "$pid" 2>/dev/null || true; done

# nftables.conf-style rulesets, from their sources.
for f in "$src"/*.nft; do
  in_ns nft flush ruleset
  in_ns nft -f "$f"
  capture "$(basename "${f%.nft}").json"
done

# iptables-nft: its conntrack match is an xtables one nft cannot express.
in_ns nft flush ruleset
in_ns iptables-nft -P INPUT DROP
in_ns iptables-nft -A INPUT -i lo -j ACCEPT
in_ns iptables-nft -A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
in_ns iptables-nft -A INPUT -p tcp --dport 22 -j ACCEPT
capture iptables-nft-policy-drop.json
