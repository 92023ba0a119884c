#!/usr/bin/env bash
# A real two-node Ray cluster on this machine (head + one worker on 127.0.0.1), for trying
# `ray job submit` without Kubernetes. Each node has 2 logical CPUs, what the embedded judge's
# replica asks for ([engine] actor_cpus); the output is absolute, since a relative one would
# sit inside the job's unpacked copy of the repo:
#   cluster/local_cluster.sh start
#   ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/study.py \
#       judgecal/configs/demo.toml --set "study.output=\"$PWD/runs/cluster-demo\""
#   cluster/local_cluster.sh stop
# judgecal itself joins it with RAY_ADDRESS=127.0.0.1:6380 (without RAY_ADDRESS it starts a
# Ray instance of its own).
set -euo pipefail
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}
case "${1:-}" in
  start)
    ray start --head --node-ip-address 127.0.0.1 --port 6380 --num-cpus 2 --dashboard-host 127.0.0.1 --dashboard-port 8265
    ray start --address 127.0.0.1:6380 --node-ip-address 127.0.0.1 --num-cpus 2
    ;;
  stop) ray stop --force ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
