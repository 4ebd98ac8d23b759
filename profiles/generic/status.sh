#!/usr/bin/env bash
# Print running, success or failed for job ID $1, as the cluster-generic executor expects.
# Set CLUSTER_STATUS to a command that prints one of those words for a job ID.
set -euo pipefail
exec ${CLUSTER_STATUS:-qstat-status} "$1"
