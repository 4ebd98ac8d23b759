#!/usr/bin/env bash
# Submit one Snakemake job script ($1) to the site scheduler and print its job ID.
# Set CLUSTER_SUBMIT to the scheduler's submit command (default: SGE-style qsub -terse).
set -euo pipefail
exec ${CLUSTER_SUBMIT:-qsub -terse -cwd -V} "$1"
