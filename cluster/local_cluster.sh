#!/usr/bin/env bash
# A real two-node Ray cluster on this machine (head + one worker on 127.0.0.1), for trying
# `ray job submit` without Kubernetes:
#   cluster/local_cluster.sh start
#   ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/study.py judgecal/configs/demo.toml
#   cluster/local_cluster.sh stop
set -euo pipefail
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}
case "${1:-}" in
  start)
    ray start --head --node-ip-address 127.0.0.1 --port 6380 --num-cpus 1 --dashboard-host 127.0.0.1 --dashboard-port 8265
    ray start --address 127.0.0.1:6380 --node-ip-address 127.0.0.1 --num-cpus 1
    ;;
  stop) ray stop --force ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
