#!/usr/bin/env bash
# HA demo (SPEC §12): three opemu replicas share one etcd (`opemu etcd`, embedded, so nothing
# else needs installing). An Application is created through a follower; the leader rolls it
# out, as every replica shows; the leader is killed with kill -9 mid-rollout; another replica
# takes over and finishes that rollout; the killed replica comes back and catches up.
#
#   examples/ha-demo.sh               the shared-state demo (builds opemu)
#   examples/ha-demo.sh --lease-file  the variant for a machine without etcd: each replica
#                                     keeps its own objects in memory and they elect one
#                                     leader through a shared lease file
#
# It uses the built binary (go run would hide the server from signals), names the leader as
# the replicas' /leader does, refuses to start when one of its ports is taken (an earlier run
# still up?), bounds every wait, and stops the processes it started (also on Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=etcd
if [[ "${1:-}" == "--lease-file" ]]; then MODE=lease-file; fi
PORTS=(${PORTS:-3001 3002 3003})
ETCD_PORTS=(${ETCD_PORTS:-12379 12380})
LEASE_DURATION=${LEASE_DURATION:-5s}
RENEW_DEADLINE=${RENEW_DEADLINE:-3s}
RETRY_PERIOD=${RETRY_PERIOD:-1s}
ROLLOUT_STEP=${ROLLOUT_STEP:-1s}
WAIT=${WAIT:-60} # seconds any one wait may take before the demo gives up
export LEASE_DURATION RENEW_DEADLINE RETRY_PERIOD ROLLOUT_STEP

# Refuse at once, before building or starting anything, when a port is taken.
taken=()
for port in "${PORTS[@]}" $([[ "$MODE" == etcd ]] && echo "${ETCD_PORTS[@]}"); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then taken+=("$port"); fi
done
if (( ${#taken[@]} )); then
  echo "examples/ha-demo.sh: port ${taken[*]} already in use on 127.0.0.1 (an earlier demo or" \
    "replica still running? stop it first, or pick free ports: PORTS='4001 4002 4003' ETCD_PORTS='14379 14380')" >&2
  exit 1
fi

work=$(mktemp -d)
pids=()      # the replicas, by index
etcd_pid=""  # opemu etcd, stopped after them
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  if [[ -n "$etcd_pid" ]]; then kill "$etcd_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# within WHAT CMD...: runs CMD until it succeeds, at most $WAIT seconds, then gives up.
within() {
  local what=$1 deadline=$((SECONDS + WAIT))
  shift
  until "$@"; do
    if ((SECONDS >= deadline)); then echo "examples/ha-demo.sh: gave up after ${WAIT}s waiting for $what" >&2; exit 1; fi
    sleep 0.1
  done
}

# leader_name PORT: the leader as the replica on PORT names it ("" while there is none).
leader_name() {
  curl -s "http://127.0.0.1:$1/leader" | grep -o '"leader":"[^"]*"' | cut -d'"' -f4 || true
}

# port_of NAME: the port of replica operator-N.
port_of() { echo "${PORTS[$((${1#operator-} - 1))]}"; }

# leader_of PORT...: prints the port of the leader that the first given replica names, once
# that leader itself says it leads.
leader_of() {
  local name port
  name=$(leader_name "$1")
  [[ "$name" == operator-* ]] || return 0
  port=$(port_of "$name")
  for p in "$@"; do
    if [[ "$p" == "$port" ]] && curl -s "http://127.0.0.1:$port/leader" | grep -q '"isLeader":true'; then echo "$port"; fi
  done
}

show() {
  for port in "$@"; do
    printf '  :%s  ' "$port"
    curl -s "http://127.0.0.1:$port/leader" | sed -E 's/.*"identity":"([^"]*)".*"isLeader":(true|false).*"leader":"([^"]*)".*/identity=\1 isLeader=\2 leader=\3/'
  done
}

has_leader() { [[ -n "$(leader_of "$@")" ]]; }
wait_leader() { within "a leader among :${*// / :}" has_leader "$@"; }

if [[ "$MODE" == lease-file ]]; then
  # Each replica is its own cluster; they share only the lease file.
  export LEASE_FILE="$work/demo.lease"
  echo "== building ./opemu"
  go build -o "$work/opemu" .
  for i in 0 1 2; do
    POD_NAME="operator-$((i + 1))" PORT="${PORTS[$i]}" "$work/opemu" 2>"$work/operator-$((i + 1)).log" &
    pids+=("$!")
  done
  echo "== waiting for a leader (each replica's /leader names it)"
  wait_leader "${PORTS[@]}"
  sleep 2.5 # let every replica observe it
  show "${PORTS[@]}"
  lead=$(leader_of "${PORTS[@]}")
  for i in 0 1 2; do [[ "${PORTS[$i]}" == "$lead" ]] && victim=${pids[$i]}; done
  echo "== kill -9 of the leader on :$lead"
  { kill -9 "$victim" && wait "$victim"; } 2>/dev/null || true
  start=$(date +%s%N)
  rest=()
  for port in "${PORTS[@]}"; do [[ "$port" != "$lead" ]] && rest+=("$port"); done
  wait_leader "${rest[@]}"
  echo "== failover after $(( ($(date +%s%N) - start) / 1000000 )) ms"
  show "${rest[@]}"
  echo "== readiness: only the leader is ready"
  for port in "${rest[@]}"; do printf '  :%s /readyz -> %s\n' "$port" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")"; done
  echo "== done; stopping the replicas this script started"
  exit 0
fi

APPS=/apis/cloudnative.elide.dev/v1/namespaces/default/applications
ENDPOINT="http://127.0.0.1:${ETCD_PORTS[0]}"

# status PORT NAME: "ready/desired phase rv=resourceVersion" of Application NAME as PORT serves it.
status() {
  local obj rv desired ready phase
  obj=$(curl -s "http://127.0.0.1:$1$APPS/$2")
  rv=$(grep -o '"resourceVersion":"[0-9]*"' <<<"$obj" | head -1 | cut -d'"' -f4)
  desired=$(grep -o '"spec":{[^}]*}' <<<"$obj" | grep -o '"replicas":[0-9]*' | cut -d: -f2)
  ready=$(grep -o '"readyReplicas":[0-9]*' <<<"$obj" | cut -d: -f2)
  phase=$(grep -o '"phase":"[A-Za-z]*"' <<<"$obj" | cut -d'"' -f4)
  echo "${ready:-0}/${desired:-?} ${phase:--} rv=${rv:-?}"
}

show_status() { # prints how every given replica sees Application $1
  local name=$1; shift
  for port in "$@"; do printf '  :%s  %s %s\n' "$port" "$name" "$(status "$port" "$name")"; done
}

ready_of() { status "$1" "$2" | cut -d/ -f1; }

serving() { # serving PID PORT: true once PORT serves the API; the demo stops if PID has exited
  kill -0 "$1" 2>/dev/null || { echo "examples/ha-demo.sh: the replica for :$2 exited:" >&2; cat "$work"/operator-*.log >&2; exit 1; }
  curl -sf -o /dev/null "http://127.0.0.1:$2/version"
}

start_replica() { # start_replica INDEX
  local i=$1
  STORE=etcd ETCD_ENDPOINTS="$ENDPOINT" POD_NAME="operator-$((i + 1))" PORT="${PORTS[$i]}" \
    "$work/opemu" 2>>"$work/operator-$((i + 1)).log" &
  pids[$i]=$!
  # /version answers once the replica is wired (while it waits for etcd only its probes do).
  within ":${PORTS[$i]} to serve" serving "${pids[$i]}" "${PORTS[$i]}"
}

echo "== building ./opemu (go build)"
go build -o "$work/opemu" .

echo "== opemu etcd: one etcd member, data in $work/etcd"
"$work/opemu" etcd --data-dir "$work/etcd" --listen-client-urls "$ENDPOINT" \
  --listen-peer-urls "http://127.0.0.1:${ETCD_PORTS[1]}" >"$work/etcd.out" 2>"$work/etcd.log" &
etcd_pid=$!
etcd_ready() {
  kill -0 "$etcd_pid" 2>/dev/null || { echo "opemu etcd failed:"; cat "$work/etcd.log"; exit 1; }
  grep -q "etcd ready" "$work/etcd.out"
}
within "opemu etcd to be ready" etcd_ready
cat "$work/etcd.out"

echo "== three replicas with STORE=etcd"
for i in 0 1 2; do start_replica "$i"; done
wait_leader "${PORTS[@]}"
sleep 2.5 # let every replica observe it
show "${PORTS[@]}"
lead=$(leader_of "${PORTS[@]}")
followers=()
for port in "${PORTS[@]}"; do [[ "$port" != "$lead" ]] && followers+=("$port"); done

echo "== create Application demo (8 replicas) through the follower :${followers[0]}"
curl -s -o /dev/null -w '  POST -> %{http_code}\n' -X POST -H 'Content-Type: application/json' \
  "http://127.0.0.1:${followers[0]}$APPS" \
  -d '{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"demo"},"spec":{"replicas":8,"image":"nginx:1.27"}}'

echo "== the leader :$lead rolls it out; every replica shows the same object and version"
rolling() { [[ "$(ready_of "$lead" demo)" -ge 2 ]]; }
within "the rollout to start" rolling
show_status demo "${PORTS[@]}"

echo "== kill -9 of the leader on :$lead mid-rollout"
for i in 0 1 2; do [[ "${PORTS[$i]}" == "$lead" ]] && victim=$i; done
{ kill -9 "${pids[$victim]}" && wait "${pids[$victim]}"; } 2>/dev/null || true
start=$(date +%s%N)
wait_leader "${followers[@]}"
echo "== failover after $(( ($(date +%s%N) - start) / 1000000 )) ms"
show "${followers[@]}"
next=$(leader_of "${followers[@]}")

echo "== the new leader :$next finishes the rollout"
finished() { status "$next" demo | grep -q "^8/8 Running"; }
within "the new leader to finish the rollout" finished
echo "== finished the rollout"
show_status demo "${followers[@]}"
echo "== who recorded the rollout's Events (source.host)"
curl -s "http://127.0.0.1:$next/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=demo" |
  grep -o '"reason":"[A-Za-z]*"[^}]*"host":"[^"]*"' |
  sed -E 's/"reason":"([A-Za-z]*)".*"host":"([^"]*)"/  \1 by \2/' | sort | uniq -c

echo "== the killed replica comes back on :$lead and catches up"
start_replica "$victim"
show_status demo "${PORTS[@]}"
echo "== caught up: every replica serves the same version"
echo "== done; stopping the replicas and the etcd this script started"
