#!/usr/bin/env bash
# emst-cluster.sh: a Dask scheduler and emst-dask workers, on one node or as
# the building blocks of the SLURM and container deployments (deploy/README.md).
#
#   emst-cluster.sh start     [options]   one node: scheduler + workers in the background
#   emst-cluster.sh start-foreground    `start`, then stay until stopped (containers)
#   emst-cluster.sh stop      [options]   stop what `start` started (by its process groups)
#   emst-cluster.sh status    [options]   the processes `start` started, and the address
#   emst-cluster.sh scheduler [options]   a scheduler in the foreground (containers, SLURM)
#   emst-cluster.sh worker    [options]   this node's workers in the foreground
#   emst-cluster.sh wait N    [options]   wait until N workers are connected
#   emst-cluster.sh client-env [options]  `export` lines that make clients use the certificates
#
# Options (each also an environment variable):
#   --dir DIR              state: scheduler.json, pid files, logs    (EMST_DIR, ./emst-cluster)
#   --scheduler-file FILE  the scheduler file             (EMST_SCHEDULER_FILE, DIR/scheduler.json)
#   --scheduler ADDRESS    workers: join this scheduler instead of the file   (EMST_SCHEDULER)
#   --host HOST            address the scheduler / workers listen on          (EMST_HOST)
#   --interface IFACE      or the network interface they listen on, e.g. ib0 (EMST_INTERFACE)
#                          Without --host, --interface or --tls everything listens on
#                          127.0.0.1 only: whoever reaches a plain-TCP scheduler runs code
#                          on its workers.
#   --scheduler-host HOST  the scheduler alone listens on HOST (workers as above); the
#                          container image sets 0.0.0.0, so that the port published from
#                          the container reaches it. A --host or --interface on the
#                          command line wins over the variable         (EMST_SCHEDULER_HOST)
#   --port PORT            scheduler port; 0 = any free one                   (EMST_PORT, 8786)
#   --dashboard ADDRESS    dashboard address, or "none"          (EMST_DASHBOARD, localhost:8787)
#   --cpu / --gpu          `dask worker` (CPU, numba) or `dask cuda worker`  (EMST_WORKER_KIND,
#                          auto: GPU when nvidia-smi lists GPUs and dask_cuda is importable)
#   --workers N            CPU workers (default 1; each gets cores/N numba threads) (EMST_WORKERS)
#   --gpus LIST            GPUs, e.g. 0,1 (one worker each; default all)    (CUDA_VISIBLE_DEVICES)
#   --device-pool SIZE     GPU workers reserve this much of the free device memory in their
#                          CuPy pool at start (fraction or bytes; "none")    (EMST_DEVICE_POOL, 0.8)
#   --rmm-pool-size SIZE   an RMM pool per GPU worker instead, CuPy allocating from it; needs
#                          the rmm package ("none": no RMM)                 (EMST_RMM_POOL_SIZE, none)
#   --tls DIR              certificates from deploy/tls/make-certs.sh: TLS everywhere (EMST_TLS_DIR)
#   --no-workers-timeout T a job whose workers all died fails after T  (EMST_NO_WORKERS_TIMEOUT, 300s)
#   --timeout SECONDS      how long start/wait wait                      (EMST_START_TIMEOUT, 180)
set -euo pipefail

die() { echo "emst-cluster: $*" >&2; exit 2; }

CMD="${1:-}"
[ -n "$CMD" ] || die "usage: emst-cluster.sh start|stop|status|scheduler|worker|wait N|client-env [options]"
shift
WAIT_N=""
if [ "$CMD" = wait ]; then
    WAIT_N="${1:-}"; shift || true
    [[ "$WAIT_N" =~ ^[0-9]+$ ]] || die "wait needs a number of workers"
fi

DIR="${EMST_DIR:-./emst-cluster}"
SCHEDULER_FILE="${EMST_SCHEDULER_FILE:-}"
SCHEDULER="${EMST_SCHEDULER:-}"
HOST="${EMST_HOST:-}"
SCHEDULER_HOST="${EMST_SCHEDULER_HOST:-}"
SCHEDULER_HOST_GIVEN=""   # --scheduler-host on the command line
INTERFACE="${EMST_INTERFACE:-}"
PORT="${EMST_PORT:-8786}"
DASHBOARD="${EMST_DASHBOARD:-localhost:8787}"
KIND="${EMST_WORKER_KIND:-auto}"
WORKERS="${EMST_WORKERS:-}"
RMM_POOL="${EMST_RMM_POOL_SIZE:-none}"
DEVICE_POOL="${EMST_DEVICE_POOL:-0.8}"
TLS_DIR="${EMST_TLS_DIR:-}"
NO_WORKERS_TIMEOUT="${EMST_NO_WORKERS_TIMEOUT:-300s}"
TIMEOUT="${EMST_START_TIMEOUT:-180}"
PYTHON="${EMST_PYTHON:-$(command -v python3 || command -v python)}"

while [ $# -gt 0 ]; do
    case "$1" in
        --dir) DIR="$2"; shift 2 ;;
        --scheduler-file) SCHEDULER_FILE="$2"; shift 2 ;;
        --scheduler) SCHEDULER="$2"; shift 2 ;;
        --host) HOST="$2"; [ -n "$SCHEDULER_HOST_GIVEN" ] || SCHEDULER_HOST=""; shift 2 ;;
        --interface) INTERFACE="$2"; [ -n "$SCHEDULER_HOST_GIVEN" ] || SCHEDULER_HOST=""; shift 2 ;;
        --scheduler-host) SCHEDULER_HOST="$2"; SCHEDULER_HOST_GIVEN=1; shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        --dashboard) DASHBOARD="$2"; shift 2 ;;
        --cpu) KIND=cpu; shift ;;
        --gpu) KIND=gpu; shift ;;
        --workers) WORKERS="$2"; shift 2 ;;
        --gpus) export CUDA_VISIBLE_DEVICES="$2"; shift 2 ;;
        --rmm-pool-size) RMM_POOL="$2"; shift 2 ;;
        --device-pool) DEVICE_POOL="$2"; shift 2 ;;
        --tls) TLS_DIR="$2"; shift 2 ;;
        --no-workers-timeout) NO_WORKERS_TIMEOUT="$2"; shift 2 ;;
        --timeout) TIMEOUT="$2"; shift 2 ;;
        *) die "unknown option $1" ;;
    esac
done
[ -n "$HOST" ] && [ -n "$INTERFACE" ] && die "give --host or --interface, not both"
if [ -z "$HOST" ] && [ -z "$INTERFACE" ] && [ -z "$TLS_DIR" ]; then
    HOST=127.0.0.1   # plain TCP is for this machine only unless asked otherwise
fi
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
SCHEDULER_FILE="${SCHEDULER_FILE:-$DIR/scheduler.json}"

# ---- TLS: the files of deploy/tls/make-certs.sh ---------------------------
tls_args() {  # tls_args ROLE: the --tls-* options of a scheduler or worker
    [ -n "$TLS_DIR" ] || return 0
    local f
    for f in ca.pem "$1.pem" "$1-key.pem"; do
        [ -r "$TLS_DIR/$f" ] || die "--tls $TLS_DIR: no readable $f (make it with deploy/tls/make-certs.sh)"
    done
    echo --tls-ca-file "$TLS_DIR/ca.pem" --tls-cert "$TLS_DIR/$1.pem" --tls-key "$TLS_DIR/$1-key.pem"
}

client_env() {  # Dask's own configuration: every Client in this environment uses the certificates
    [ -n "$TLS_DIR" ] || return 0
    local d; d="$(cd "$TLS_DIR" && pwd)"
    echo "export DASK_DISTRIBUTED__COMM__TLS__CA_FILE='$d/ca.pem'"
    echo "export DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT='$d/client.pem'"
    echo "export DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY='$d/client-key.pem'"
    echo "export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True"
}

listen_args() {  # where a scheduler or worker listens
    if [ -n "$HOST" ]; then echo --host "$HOST"
    elif [ -n "$INTERFACE" ]; then echo --interface "$INTERFACE"; fi
}

dashboard_args() {  # dashboard_args DEFAULT_PORT
    # "none": no dashboard; dask still serves /health and /metrics over HTTP,
    # so that goes to loopback (or the --host given), on any free port
    if [ "$DASHBOARD" = none ]; then echo --no-dashboard --dashboard-address "${HOST:-127.0.0.1}:0"; return; fi
    if [ "$1" = scheduler ]; then echo --dashboard-address "$DASHBOARD"
    else echo --dashboard-address "${DASHBOARD%:*}:0"; fi   # workers: same interface, any port
}

gpu_count() {
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
        echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .
    elif command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
    else
        echo 0
    fi
}

resolve_kind() {
    case "$KIND" in
        cpu|gpu) ;;
        auto)
            if [ "$(gpu_count)" -gt 0 ] && "$PYTHON" -c "import dask_cuda" 2>/dev/null; then
                KIND=gpu
            else
                KIND=cpu
                echo "emst-cluster: no GPU (or no dask-cuda): CPU workers (dask worker)" >&2
            fi ;;
        *) die "worker kind must be cpu, gpu or auto, got $KIND" ;;
    esac
}

n_workers() {  # the workers this node starts
    if [ "$KIND" = gpu ]; then gpu_count; else echo "${WORKERS:-1}"; fi
}

# ---- the commands ----------------------------------------------------------
scheduler_cmd() {
    local args=(dask scheduler --scheduler-file "$SCHEDULER_FILE" --port "$PORT")
    if [ -n "$SCHEDULER_HOST" ]; then args+=(--host "$SCHEDULER_HOST")
    else args+=($(listen_args)); fi
    [ -n "$TLS_DIR" ] && args+=(--protocol tls $(tls_args scheduler))
    args+=($(dashboard_args scheduler))
    echo "${args[@]}"
}

worker_cmd() {
    local target=(--scheduler-file "$SCHEDULER_FILE")
    [ -n "$SCHEDULER" ] && target=("$SCHEDULER")
    local args
    if [ "$KIND" = gpu ]; then
        # one worker per visible GPU, one thread each (the kernels fill the GPU);
        # the preload reserves the CuPy pool of EMST_DEVICE_POOL (worker_env)
        args=(dask cuda worker "${target[@]}" --nthreads 1 --preload emst_dask.distributed.worker)
        if [ "$RMM_POOL" != none ]; then
            # the kernels allocate through CuPy: an RMM pool CuPy did not use
            # would leave the jobs only what RMM left over
            args+=(--rmm-pool-size "$RMM_POOL" --set-rmm-allocator-for-libs cupy)
        fi
    else
        args=(dask worker "${target[@]}" --nworkers "${WORKERS:-1}" --nthreads 1)
    fi
    args+=($(listen_args) $(tls_args worker) $(dashboard_args worker))
    echo "${args[@]}"
}

scheduler_env() {
    export DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT="$NO_WORKERS_TIMEOUT"
}

worker_env() {
    if [ "$KIND" = gpu ]; then
        # one pool only: with RMM, CuPy allocates from RMM's
        if [ "$RMM_POOL" != none ]; then export EMST_DEVICE_POOL=none
        else export EMST_DEVICE_POOL="$DEVICE_POOL"; fi
    fi
    # the numba kernels (CPU backend; host steps of partitioned jobs on GPU
    # workers) bring their own threads: share the cores between the workers
    if [ -z "${NUMBA_NUM_THREADS:-}" ]; then
        local cores; cores="$(nproc 2>/dev/null || echo 1)"
        local n="${WORKERS:-1}"
        if [ "$KIND" = gpu ]; then
            n="$(gpu_count)"   # dask cuda worker: one worker per GPU
            [ "${n:-0}" -gt 0 ] 2>/dev/null || n=1
        fi
        export NUMBA_NUM_THREADS=$(( cores / n > 0 ? cores / n : 1 ))
    fi
}

wait_for() {  # wait_for N: N workers connected to the scheduler of SCHEDULER_FILE
    local n="$1"
    EMST_WAIT_FILE="$SCHEDULER_FILE" EMST_WAIT_N="$n" EMST_WAIT_TIMEOUT="$TIMEOUT" \
    EMST_WAIT_TLS="$TLS_DIR" "$PYTHON" - <<'EOF'
import json, os, sys, time
from distributed import Client
from distributed.security import Security

path, n = os.environ["EMST_WAIT_FILE"], int(os.environ["EMST_WAIT_N"])
deadline = time.monotonic() + float(os.environ["EMST_WAIT_TIMEOUT"])
tls = os.environ["EMST_WAIT_TLS"]
security = None
if tls:
    security = Security(tls_ca_file=f"{tls}/ca.pem", tls_client_cert=f"{tls}/client.pem",
                        tls_client_key=f"{tls}/client-key.pem", require_encryption=True)
while True:
    try:
        with open(path) as fh:
            address = json.load(fh)["address"]
        break
    except (OSError, ValueError, KeyError):
        if time.monotonic() > deadline:
            sys.exit(f"emst-cluster: no scheduler file {path}")
        time.sleep(0.3)
with Client(address, security=security, timeout="30s", set_as_default=False) as c:
    c.wait_for_workers(n, timeout=max(1.0, deadline - time.monotonic()))
    print(address)
EOF
}

pids_alive() {  # the process groups of DIR/*.pid that still have processes
    local f pg
    for f in "$DIR"/*.pid; do
        [ -e "$f" ] || continue
        pg="$(cat "$f")"
        if kill -0 -- "-$pg" 2>/dev/null; then echo "$f $pg"; fi
    done
}

launch() {  # launch NAME CMD...: in the background, in its own process group
    local name="$1"; shift
    setsid "$@" >"$DIR/$name.log" 2>&1 </dev/null &
    echo $! >"$DIR/$name.pid"
}

stop_all() {
    local f pg deadline
    # workers first (they leave the scheduler cleanly), then the scheduler
    for f in "$DIR"/worker*.pid "$DIR"/scheduler.pid; do
        [ -e "$f" ] || continue
        pg="$(cat "$f")"
        kill -TERM -- "-$pg" 2>/dev/null || true
        deadline=$(( SECONDS + 30 ))
        while kill -0 -- "-$pg" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
        if kill -0 -- "-$pg" 2>/dev/null; then
            echo "emst-cluster: $f: still running after 30 s, killing it" >&2
            kill -KILL -- "-$pg" 2>/dev/null || true
        fi
        rm -f "$f"
    done
    rm -f "$SCHEDULER_FILE"
}

do_start() {
    [ -z "$(pids_alive)" ] || die "$DIR: a cluster is running (emst-cluster.sh stop --dir $DIR)"
    [ -z "$SCHEDULER" ] || die "start runs its own scheduler; --scheduler is for worker"
    resolve_kind
    N="$(n_workers)"
    [ "$N" -gt 0 ] || die "no workers to start (no GPU visible? use --cpu)"
    rm -f "$SCHEDULER_FILE"
    ( scheduler_env; launch scheduler $(scheduler_cmd) )
    for _ in $(seq 1 $(( TIMEOUT * 5 ))); do [ -e "$SCHEDULER_FILE" ] && break; sleep 0.2; done
    [ -e "$SCHEDULER_FILE" ] || { stop_all; die "the scheduler did not start: $(tail -5 "$DIR/scheduler.log")"; }
    ( worker_env; launch worker $(worker_cmd) )
    if ! ADDRESS="$(wait_for "$N")"; then
        tail -20 "$DIR"/*.log >&2 || true
        stop_all
        die "the cluster did not come up within $TIMEOUT s"
    fi
    echo "scheduler $ADDRESS ($N $KIND worker(s)); scheduler file $SCHEDULER_FILE; logs $DIR/*.log"
    if [ -n "$TLS_DIR" ]; then
        echo "clients: eval \"\$($0 client-env --tls $TLS_DIR)\""
    fi
}

case "$CMD" in
    scheduler)
        scheduler_env
        # shellcheck disable=SC2046
        exec $(scheduler_cmd)
        ;;
    worker)
        resolve_kind
        worker_env
        [ -n "$SCHEDULER" ] || [ -e "$SCHEDULER_FILE" ] || {
            # the scheduler may still be starting (SLURM, compose): wait for its file
            for _ in $(seq 1 "$TIMEOUT"); do [ -e "$SCHEDULER_FILE" ] && break; sleep 1; done; }
        # shellcheck disable=SC2046
        exec $(worker_cmd)
        ;;
    start)
        do_start
        ;;
    start-foreground)
        # containers: start, then stay until the processes end or a signal comes
        do_start
        trap 'stop_all; exit 0' TERM INT
        while [ -n "$(pids_alive)" ]; do sleep 2; done
        echo "emst-cluster: the cluster's processes ended" >&2
        exit 1
        ;;
    stop)
        stop_all
        echo "stopped the cluster of $DIR"
        ;;
    status)
        alive="$(pids_alive)"
        [ -n "$alive" ] || { echo "no cluster running in $DIR"; exit 1; }
        echo "$alive"
        [ -e "$SCHEDULER_FILE" ] && "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['address'])" "$SCHEDULER_FILE"
        ;;
    wait)
        wait_for "$WAIT_N"
        ;;
    client-env)
        client_env
        ;;
    *)
        die "unknown command $CMD (start|start-foreground|stop|status|scheduler|worker|wait N|client-env)"
        ;;
esac
