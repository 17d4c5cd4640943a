#!/usr/bin/env bash
# Submit an EMST job of one snapshot on 4 GPU nodes; the edge store lands next
# to it. Run from the repository root (the batch script finds deploy/ there).
# Paths must be on a file system every node sees.
set -euo pipefail
SNAP="${1:-/shared/snapshots/snap_042.zarr}"
OUT="${2:-${SNAP%.zarr}-edges.zarr}"

# Across nodes the cluster needs TLS (certificates once, on the shared file
# system; the CA key lands in /shared/emst-certs-ca: move it off the cluster)
#   deploy/tls/make-certs.sh /shared/emst-certs && export EMST_TLS_DIR=/shared/emst-certs
# or, on a network you trust, plain TCP over one interface:
#   export EMST_INTERFACE=ib0

sbatch --nodes=4 --gpus-per-node=4 --time=01:00:00 \
    --export=ALL,EMST_DEPLOY="$PWD/deploy" \
    deploy/slurm/emst-dask.sbatch \
    emst-dask run "$SNAP" --out "$OUT" --progress
# many snapshots in one allocation: a Python script using emst_dask.emst_many with
#   client=os.environ["EMST_SCHEDULER_FILE"]  (one job per GPU at a time)
