"""deploy/: the one-node script, the SLURM batch script (through a stand-in
``srun``), TLS and the container's commands, each run for real: scheduler and
CPU worker processes (``dask worker`` standing in for ``dask cuda worker``)
on 127.0.0.1, a client running an exact job, everything gone afterwards."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import urllib.request

import numpy as np
import psutil
import pytest
import yaml

import emst_dask
from emst_dask.io.edge_store import open_edges
from service_util import assert_same_tree, cloud, free_port, write_snapshot

distributed = pytest.importorskip("distributed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy")
CLUSTER = os.path.join(DEPLOY, "emst-cluster.sh")
BIN = os.path.dirname(sys.executable)   # python3, dask, emst-dask of this environment


def deploy_env(**extra):
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["NUMBA_NUM_THREADS"] = "1"
    env["EMST_PYTHON"] = sys.executable
    for k in list(env):
        if k.startswith(("EMST_", "DASK_", "SLURM")) and k != "EMST_PYTHON":
            del env[k]
    env.update({k: str(v) for k, v in extra.items()})
    return env


def sh(args, env, timeout=240, check=True):
    import time
    t0 = time.time()
    res = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"[{time.time() - t0:.1f} s] {' '.join(map(str, args))[:100]}")
    if check:
        assert res.returncode == 0, f"{args} -> {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def procs_mentioning(text):
    """Live processes whose command line mentions ``text`` (a test's tmp dir)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if text in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid():
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def group_members(pid_files):
    members = []
    for f in pid_files:
        pg = int(open(f).read())
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(p.pid) == pg:
                    members.append(p)
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass
    return members


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    d = tmp_path_factory.mktemp("deploy-snap")
    pts = cloud(1200, 3, seed=61)
    return write_snapshot(d / "snap.zarr", pts, chunk_rows=300), pts


def _start(tmp_path, *opts, env=None):
    env = env or deploy_env()
    port = free_port()
    run_dir = tmp_path / "cluster"
    res = sh([CLUSTER, "start", "--dir", str(run_dir), "--cpu", "--workers", "2",
              "--host", "127.0.0.1", "--port", str(port), "--dashboard", "127.0.0.1:0",
              "--timeout", "180", *opts], env)
    return run_dir, res.stdout


def _stop_and_check_gone(run_dir, env):
    pid_files = [run_dir / "scheduler.pid", run_dir / "worker.pid"]
    members = group_members(pid_files)
    assert len(members) >= 4, "scheduler, worker CLI, 2 nannies + 2 workers"
    res = sh([CLUSTER, "stop", "--dir", str(run_dir)], env)
    assert "stopped" in res.stdout
    alive = [p for p in members if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"still running after stop: {alive}"
    assert procs_mentioning(str(run_dir)) == []
    assert not os.path.exists(run_dir / "scheduler.json")
    st = sh([CLUSTER, "status", "--dir", str(run_dir)], env, check=False)
    assert st.returncode == 1 and "no cluster running" in st.stdout


def test_one_node_start_job_stop(tmp_path, snap):
    path, pts = snap
    env = deploy_env()
    run_dir, out = _start(tmp_path, env=env)
    try:
        m = re.search(r"scheduler (tcp://127\.0\.0\.1:\d+) \(2 cpu worker", out)
        assert m, out
        address = m.group(1)
        assert json.load(open(run_dir / "scheduler.json"))["address"] == address
        st = sh([CLUSTER, "status", "--dir", str(run_dir)], env)
        assert address in st.stdout
        # a second start on the same directory is refused, the first keeps running
        again = sh([CLUSTER, "start", "--dir", str(run_dir), "--cpu"], env, check=False)
        assert again.returncode == 2 and "a cluster is running" in again.stderr
        from distributed import Client

        with Client(address, set_as_default=False, timeout="30s") as c:
            info = c.scheduler_info()
            assert len(info["workers"]) == 2
            assert all(w["nthreads"] == 1 for w in info["workers"].values())
            # the dashboard listens on 127.0.0.1 as asked
            link = c.dashboard_link
            assert link.startswith("http://127.0.0.1:"), link
            with urllib.request.urlopen(link.replace("/status", "/info/main/workers.html"),
                                        timeout=30) as r:
                assert r.status == 200
            store = emst_dask.emst(path, client=c, out=tmp_path / "edges.zarr")
        assert_same_tree(open_edges(store), pts)
        # the command line, by the scheduler file, from another process
        res = sh([os.path.join(BIN, "emst-dask"), "run", path, "--out",
                  str(tmp_path / "cli.npy"), "--scheduler-file",
                  str(run_dir / "scheduler.json")], env)
        e = np.load(tmp_path / "cli.npy")
        assert e.shape == (len(pts) - 1, 3), res.stdout
        assert np.isclose(e[:, 2].sum(), emst_dask.emst(pts).total_weight, rtol=1e-12)
    finally:
        _stop_and_check_gone(run_dir, env)


FAKE_SRUN = r"""#!/usr/bin/env bash
# stand-in srun: runs the command once per node of the allocation, locally,
# with the SLURM variables of a task; forwards TERM/INT to the tasks
nodes="${SLURM_JOB_NUM_NODES:-1}"
while [[ "${1:-}" == --* ]]; do
    case "$1" in --nodes=*) nodes="${1#--nodes=}" ;; esac
    shift
done
echo "srun $nodes node(s): $*" >> "$SLURM_SUBMIT_DIR/srun.log"
pids=()
for ((i = 0; i < nodes; i++)); do
    SLURM_PROCID=$i SLURM_NODEID=$i SLURM_LOCALID=0 SLURMD_NODENAME=fake-node$i "$@" &
    pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait' TERM INT
wait
"""


def test_slurm_batch_with_fake_srun(tmp_path, snap):
    path, pts = snap
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "srun").write_text(FAKE_SRUN)
    os.chmod(fake_bin / "srun", 0o755)
    (tmp_path / "client.py").write_text(textwrap.dedent(f"""
        import os, sys
        import emst_dask
        from distributed import Client
        with Client(scheduler_file=os.environ["EMST_SCHEDULER_FILE"], timeout="30s") as c:
            workers = c.scheduler_info()["workers"]
            print("workers", len(workers))
            tree = emst_dask.emst({path!r}, client=c)
            print("total", repr(tree.total_weight), tree.n_edges)
    """))
    env = deploy_env(SLURM_JOB_ID=4242, SLURM_JOB_NUM_NODES=2, SLURM_NNODES=2,
                     SLURM_SUBMIT_DIR=tmp_path, EMST_DEPLOY=DEPLOY, EMST_WORKER_KIND="cpu",
                     EMST_HOST="127.0.0.1", EMST_DASHBOARD="none")
    env["PATH"] = str(fake_bin) + os.pathsep + env["PATH"]
    out = tmp_path / "slurm-edges.zarr"
    # the batch script as sbatch runs it: bash, in the submit directory, the command after it
    cmd = (f"emst-dask run {path} --out {out} && {sys.executable} {tmp_path / 'client.py'}")
    res = subprocess.run(["bash", os.path.join(DEPLOY, "slurm", "emst-dask.sbatch"),
                          "bash", "-c", cmd], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    run_dir = tmp_path / "emst-dask-4242"
    logs = "\n".join(f"--- {f}\n{f.read_text()[-2000:]}" for f in sorted(run_dir.glob("*.log")))
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}\n{logs}"
    assert "srun 2 node(s)" in (tmp_path / "srun.log").read_text()
    assert (run_dir / "worker-fake-node0-0.log").exists()
    assert (run_dir / "worker-fake-node1-1.log").exists()
    # the address came from the scheduler file (removed by the scheduler when it stopped)
    assert re.search(r"emst-dask: scheduler tcp://127\.0\.0\.1:\d+, scheduler file "
                     + re.escape(str(run_dir / "scheduler.json")), res.stdout), res.stdout
    assert not (run_dir / "scheduler.json").exists()
    assert "workers 2" in res.stdout, res.stdout
    ref = emst_dask.emst(pts)
    assert f"total {ref.total_weight!r} {len(pts) - 1}" in res.stdout, res.stdout
    assert_same_tree(open_edges(out), pts, reference=ref)
    # the batch script stopped its scheduler and the srun tasks
    assert procs_mentioning(str(tmp_path)) == []


def _certs(d):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    sh([os.path.join(DEPLOY, "tls", "make-certs.sh"), str(d), "node1"], deploy_env())
    return d


def _connects(*tries):
    """For each (address, (ca, cert, key) or None) in ``tries``: whether a
    client connects to the address with those certificates.  Each client is
    tried in a process of its own, all at once: a refused handshake can
    leave a client retrying past its timeout on a loaded machine, and a
    client that never connects counts as refused."""
    code = textwrap.dedent("""
        import sys
        from distributed import Client
        from distributed.security import Security
        address, ca, cert, key = sys.argv[1:]
        sec = None if ca == "-" else Security(
            tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key,
            require_encryption=True)
        try:
            Client(address, security=sec, set_as_default=False, timeout="5s").close()
        except Exception:
            print("refused")
        else:
            print("connected")
        """)
    procs = []
    for addr, files in tries:
        files = [str(f) for f in files] if files else ["-"] * 3
        procs.append(subprocess.Popen([sys.executable, "-c", code, addr, *files],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True))
    out = []
    for p in procs:
        try:
            out.append("connected" in p.communicate(timeout=90)[0].split())
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            out.append(False)
    return out


def test_tls(tmp_path, snap):
    path, pts = snap
    certs = _certs(tmp_path / "certs")
    for f in ("ca.pem", "scheduler.pem", "worker.pem", "client.pem", "client-key.pem"):
        assert (certs / f).exists()
    assert oct(os.stat(certs / "client-key.pem").st_mode & 0o777) == "0o600"
    env = deploy_env()
    run_dir, out = _start(tmp_path, "--tls", str(certs), env=env)
    try:
        address = json.load(open(run_dir / "scheduler.json"))["address"]
        assert address.startswith("tls://127.0.0.1:"), address
        from distributed import Client
        from distributed.security import Security

        sec = Security(tls_ca_file=str(certs / "ca.pem"), tls_client_cert=str(certs / "client.pem"),
                       tls_client_key=str(certs / "client-key.pem"), require_encryption=True)
        with Client(address, security=sec, set_as_default=False, timeout="30s") as c:
            assert len(c.scheduler_info()["workers"]) == 2
            assert all(w.startswith("tls://") for w in c.scheduler_info()["workers"])
            tree = emst_dask.emst(path, client=c)
        assert_same_tree(tree, pts)
        # no certificates, plain TCP to the TLS port, a client certificate of
        # another CA: refused
        other = _certs(tmp_path / "other-certs")
        tried = _connects(
            (address, None), (address.replace("tls://", "tcp://"), None),
            (address, (certs / "ca.pem", other / "client.pem", other / "client-key.pem")),
            (address, (certs / "ca.pem", certs / "client.pem", certs / "client-key.pem")))
        # refused, refused, refused; the check sees the good client connect
        assert tried == [False, False, False, True], tried
        # the command line with the environment of `emst-cluster.sh client-env`
        ce = sh([CLUSTER, "client-env", "--dir", str(run_dir), "--tls", str(certs)], env).stdout
        cli_env = dict(env)
        for k, v in re.findall(r"export (\w+)='([^']*)'", ce):
            cli_env[k] = v
        assert cli_env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"] == str(certs / "client.pem")
        sh([os.path.join(BIN, "emst-dask"), "run", path, "--out", str(tmp_path / "tls.zarr"),
            "--scheduler-file", str(run_dir / "scheduler.json")], cli_env)
        assert_same_tree(open_edges(tmp_path / "tls.zarr"), pts)
    finally:
        _stop_and_check_gone(run_dir, env)


def test_container_commands(tmp_path, snap):
    """The Dockerfile's entrypoint and the compose services' commands, run
    here as they run in the containers (CPU workers standing in for GPUs)."""
    path, pts = snap
    docker = open(os.path.join(DEPLOY, "docker", "Dockerfile")).read()
    assert re.search(r"^ARG CUDA_IMAGE=nvidia/cuda:[\w.]+-runtime-ubuntu[\d.]+$", docker, re.M)
    assert re.search(r'pip install [^\n]*"\.\[cuda\]"', docker)
    m = re.search(r"^ENTRYPOINT \[\"/opt/emst-dask/(deploy/emst-cluster\.sh)\"\]", docker, re.M)
    assert m and os.access(os.path.join(ROOT, m.group(1)), os.X_OK)
    for src in re.findall(r"^COPY (\S+)", docker, re.M):
        assert os.path.exists(os.path.join(ROOT, src)), src
    compose = yaml.safe_load(open(os.path.join(DEPLOY, "docker", "compose.yaml")))
    services = compose["services"]
    assert services["worker"]["deploy"]["resources"]["reservations"]["devices"][0][
        "capabilities"] == ["gpu"]
    assert all(p.startswith("127.0.0.1:") for p in services["scheduler"]["ports"])

    port = free_port()
    run_dir = tmp_path / "containers"
    procs = []
    try:
        for name in ("scheduler", "worker"):
            svc = services[name]
            args = [a.replace("scheduler:8786", f"127.0.0.1:{port}").replace("8786", str(port))
                    for a in svc["command"]]
            args = ["--cpu" if a == "--gpu" else a for a in args]
            args = [a for a in args if a != "0.0.0.0:8787"]
            if "--interface" in args:  # the containers' eth0: here, loopback
                args[args.index("--interface"):args.index("--interface") + 2] = []
            if "--dashboard" in args:
                args[args.index("--dashboard"):args.index("--dashboard") + 1] = []
            env = deploy_env(**{k: v for k, v in (svc.get("environment") or {}).items()})
            env.update(EMST_DIR=str(run_dir), EMST_HOST="127.0.0.1", EMST_DASHBOARD="none")
            log = open(tmp_path / f"{name}.log", "w")
            procs.append(subprocess.Popen([CLUSTER, *args], env=env, stdout=log,
                                          stderr=subprocess.STDOUT))
        from distributed import Client

        with Client(f"tcp://127.0.0.1:{port}", set_as_default=False, timeout="60s") as c:
            c.wait_for_workers(1, timeout=180)
            tree = emst_dask.emst(path, client=c)
        assert_same_tree(tree, pts)
    finally:
        for p in procs[::-1]:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
    assert all(p.returncode is not None for p in procs)
    assert procs_mentioning(str(run_dir)) == []
    assert procs_mentioning(f"127.0.0.1:{port}") == []


def _image_env():
    """The ENV settings of the Dockerfile (KEY=VALUE pairs, continued lines)."""
    docker = open(os.path.join(DEPLOY, "docker", "Dockerfile")).read()
    env = {}
    for block in re.findall(r"^ENV ((?:.*\\\n)*.*)$", docker, re.M):
        for key, value in re.findall(r"(\w+)=(\S+)", block.replace("\\\n", " ")):
            env[key] = value
    return env


def _outside_address():
    """This machine's address on its network, as a published container port
    reaches the container (not its loopback); None if it has only loopback."""
    from distributed.utils import get_ip

    ip = get_ip()
    return None if ip.startswith("127.") else ip


def test_container_entrypoint_is_reachable_from_outside(tmp_path, snap):
    """The image's entrypoint and default command (``start-foreground``), run
    with the image's environment: the scheduler must listen where a port
    published from the container arrives -- the container's own address,
    not its loopback -- and a client connecting there runs a job; the
    workers stay on loopback.  (Here the machine's network address stands
    for the container's; the port is a free one, the dashboard any port.)"""
    path, pts = snap
    docker = open(os.path.join(DEPLOY, "docker", "Dockerfile")).read()
    entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", docker, re.M).group(1))
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", docker, re.M).group(1))
    assert entry == ["/opt/emst-dask/deploy/emst-cluster.sh"] and cmd == ["start-foreground"]
    image = _image_env()
    assert "EMST_HOST" not in image and "EMST_TLS_DIR" not in image
    port = free_port()
    run_dir = tmp_path / "container"
    env = deploy_env(**{k: v for k, v in image.items() if k.startswith("EMST_")})
    env.update(EMST_DIR=str(run_dir), EMST_PORT=str(port), EMST_WORKER_KIND="cpu",
               EMST_WORKERS="1", EMST_DASHBOARD=image["EMST_DASHBOARD"].rsplit(":", 1)[0] + ":0")
    log_path = tmp_path / "entrypoint.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([CLUSTER, *cmd], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    groups = []
    try:
        import time

        deadline = time.monotonic() + 180
        # started: the scheduler and worker process groups, then the line `start` prints
        while time.monotonic() < deadline and "worker(s)" not in open(log_path).read():
            assert proc.poll() is None, open(log_path).read()
            time.sleep(0.5)
        groups = [int(open(run_dir / f).read()) for f in ("scheduler.pid", "worker.pid")]
        sched = psutil.Process(int(open(run_dir / "scheduler.pid").read()))
        listening = {c.laddr.ip for p in [sched, *sched.children(recursive=True)]
                     for c in p.net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
        assert listening & {"0.0.0.0", "::"}, \
            f"the scheduler listens on {listening} only: a published port cannot reach it"
        from distributed import Client

        outside = _outside_address()
        for host in ([outside] if outside else []) + ["127.0.0.1"]:
            with Client(f"tcp://{host}:{port}", set_as_default=False, timeout="20s") as c:
                c.wait_for_workers(1, timeout=120)
                workers = list(c.scheduler_info()["workers"])
                assert all(w.startswith("tcp://127.0.0.1:") for w in workers), workers
                tree = emst_dask.emst(path, client=c)
            assert_same_tree(tree, pts)
    finally:
        proc.terminate()  # the entrypoint's trap stops the cluster
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
        log.close()
        for pg in groups:  # what the entrypoint started, should it not have stopped it
            try:
                os.killpg(pg, 9)
            except ProcessLookupError:
                pass
    assert proc.returncode == 0, open(log_path).read()
    assert procs_mentioning(str(run_dir)) == []
