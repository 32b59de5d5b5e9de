#!/bin/bash
# Exits 0 when http://127.0.0.1:PORT/PATH answers 200 within 1 second.
# keepalived runs it as the unprivileged script user. Bash's /dev/tcp keeps
# the keepalived image free of curl; the arguments come from keepalived.conf,
# where vipctl writes only validated port numbers and fixed paths.
set -u
port=${1:?port}
path=${2:?path}
case $port in *[!0-9]*) exit 2 ;; esac
case $path in /*) ;; *) exit 2 ;; esac
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET %s HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n' "$path" >&3
IFS=' ' read -r -t 1 _ status _ <&3 || exit 1
[ "$status" = 200 ]
