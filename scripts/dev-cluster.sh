#!/usr/bin/env bash
# Starts a 3-node nats-server JetStream cluster on loopback for trying actorloop on a cluster
# (docs/deploy.md): free ports, stores under one directory, each node with its own server_name.
# Waits until every node answers /healthz?js-enabled-only=true and the cluster has a meta leader,
# then prints the NATS_URL list to use and runs until Ctrl-C, which stops the three servers.
#
#   scripts/dev-cluster.sh [DIR]        # DIR keeps the stores (default: a temp dir, removed at exit)
#
#   export NATS_URL=nats://127.0.0.1:PORT1,nats://127.0.0.1:PORT2,nats://127.0.0.1:PORT3
#   export ACTORLOOP_REPLICAS=3
#   actorloop doctor
#
# Restarting a node by hand: kill its pid (printed below) and run the command line printed for it;
# it comes back with the same name, ports and store. NATS_SERVER names the binary (default:
# nats-server on PATH, else /usr/sbin/nats-server).
set -euo pipefail

NATS_SERVER=${NATS_SERVER:-$(command -v nats-server || echo /usr/sbin/nats-server)}
[ -x "$NATS_SERVER" ] || { echo "nats-server not found (install it: apt-get install -y nats-server, or set NATS_SERVER)" >&2; exit 1; }

if [ $# -ge 1 ]; then DIR=$1; KEEP=1; mkdir -p "$DIR"; else DIR=$(mktemp -d -t actorloop-cluster-XXXXXX); KEEP=0; fi

# a free loopback port: bind 0 and report what the kernel gave (node is there: actorloop needs it)
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

declare -a PORTS CPORTS MPORTS PIDS
for i in 1 2 3; do PORTS[$i]=$(free_port); CPORTS[$i]=$(free_port); MPORTS[$i]=$(free_port); done
ROUTES=""
for i in 1 2 3; do ROUTES+="\"nats-route://127.0.0.1:${CPORTS[$i]}\", "; done

stop() {
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ "$KEEP" = 1 ] || rm -rf "$DIR"
}
trap stop EXIT INT TERM

for i in 1 2 3; do
  mkdir -p "$DIR/n$i"
  cat > "$DIR/n$i.conf" <<EOF
server_name: n$i
http: "127.0.0.1:${MPORTS[$i]}"
jetstream { store_dir: "$DIR/n$i" }
cluster {
  name: actorloop-dev
  listen: "127.0.0.1:${CPORTS[$i]}"
  routes: [${ROUTES%, }]
}
EOF
  "$NATS_SERVER" -a 127.0.0.1 -p "${PORTS[$i]}" -c "$DIR/n$i.conf" >> "$DIR/n$i.log" 2>&1 &
  PIDS[$i]=$!
done

healthy() { curl -fsS "http://127.0.0.1:$1/healthz?js-enabled-only=true" >/dev/null 2>&1; }
for _ in $(seq 1 300); do
  ok=1
  for i in 1 2 3; do healthy "${MPORTS[$i]}" || ok=0; done
  if [ $ok = 1 ] && curl -fsS "http://127.0.0.1:${MPORTS[1]}/jsz" 2>/dev/null | grep -q '"leader": *"n'; then break; fi
  sleep 0.1
done
[ $ok = 1 ] || { echo "the cluster did not become healthy; see $DIR/n*.log" >&2; exit 1; }

URLS="nats://127.0.0.1:${PORTS[1]},nats://127.0.0.1:${PORTS[2]},nats://127.0.0.1:${PORTS[3]}"
for i in 1 2 3; do
  echo "n$i  pid ${PIDS[$i]}  client ${PORTS[$i]}  cluster ${CPORTS[$i]}  monitor http://127.0.0.1:${MPORTS[$i]}  restart: $NATS_SERVER -a 127.0.0.1 -p ${PORTS[$i]} -c $DIR/n$i.conf"
done
echo
echo "export NATS_URL=$URLS"
echo "export ACTORLOOP_REPLICAS=3"
echo
echo "stores and logs in $DIR; Ctrl-C stops the cluster"
wait
