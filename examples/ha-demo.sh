#!/usr/bin/env bash
# HA demo: three opemu replicas elect one leader through a shared lease file; killing the
# leader hands leadership to another within LEASE_DURATION + 4.4 x RETRY_PERIOD.
# It uses the built binary (go run would hide the server from signals) and stops only the
# processes it started.
set -euo pipefail
cd "$(dirname "$0")/.."

PORTS=(${PORTS:-3001 3002 3003})
LEASE_DURATION=${LEASE_DURATION:-5s}
RENEW_DEADLINE=${RENEW_DEADLINE:-3s}
RETRY_PERIOD=${RETRY_PERIOD:-1s}
work=$(mktemp -d)
export LEASE_FILE="$work/demo.lease" LEASE_DURATION RENEW_DEADLINE RETRY_PERIOD

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building ./opemu"
go build -o "$work/opemu" .

for i in 0 1 2; do
  POD_NAME="operator-$((i + 1))" PORT="${PORTS[$i]}" "$work/opemu" 2>"$work/operator-$((i + 1)).log" &
  pids+=("$!")
done

leader_of() { # prints the port of the replica that leads, if any
  for port in "$@"; do
    if curl -s "http://127.0.0.1:$port/leader" | grep -q '"isLeader":true'; then echo "$port"; return; fi
  done
}

show() {
  for port in "$@"; do
    printf '  :%s  ' "$port"
    curl -s "http://127.0.0.1:$port/leader" | sed -E 's/.*"identity":"([^"]*)".*"isLeader":(true|false).*"leader":"([^"]*)".*/identity=\1 isLeader=\2 leader=\3/'
  done
}

echo "== waiting for a leader"
until [[ -n "$(leader_of "${PORTS[@]}")" ]]; do sleep 0.2; done
sleep 2.5 # let every replica observe it
show "${PORTS[@]}"
lead=$(leader_of "${PORTS[@]}")
for i in 0 1 2; do [[ "${PORTS[$i]}" == "$lead" ]] && victim=${pids[$i]}; done

echo "== kill -9 of the leader on :$lead"
{ kill -9 "$victim" && wait "$victim"; } 2>/dev/null || true
start=$(date +%s%N)
rest=()
for port in "${PORTS[@]}"; do [[ "$port" != "$lead" ]] && rest+=("$port"); done
until [[ -n "$(leader_of "${rest[@]}")" ]]; do sleep 0.1; done
echo "== failover after $(( ($(date +%s%N) - start) / 1000000 )) ms"
show "${rest[@]}"
echo "== readiness: only the leader is ready"
for port in "${rest[@]}"; do printf '  :%s /readyz -> %s\n' "$port" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")"; done
echo "== done; stopping the replicas this script started"
