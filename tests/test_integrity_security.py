"""Security defaults (the integrity issue, defect 16).  Every test fails on
the code the issue was filed against and pins the behaviour the fix must have:

* 16a ``test_embedded_cluster_dashboard_listens_on_loopback_only``: the
  embedded cluster's dashboard (today on every interface, 0.0.0.0) listens
  on 127.0.0.1 / ::1 only, as its scheduler and workers already do.
* 16b ``test_cluster_script_listens_on_loopback_by_default``:
  ``deploy/emst-cluster.sh start`` without ``--host`` and without TLS (today
  plain TCP on every interface) puts its scheduler and workers on 127.0.0.1.
* 16c ``test_make_certs_keeps_the_ca_key_away_from_the_cluster_certificates``:
  ``deploy/tls/make-certs.sh DIR`` does not leave the CA's private key in the
  directory handed to the cluster (today ``DIR/ca-key.pem``).
"""
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
from urllib.parse import urlparse

import psutil
import pytest

import emst_dask
from service_util import free_port

distributed = pytest.importorskip("distributed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy")
CLUSTER = os.path.join(DEPLOY, "emst-cluster.sh")
MAKE_CERTS = os.path.join(DEPLOY, "tls", "make-certs.sh")
BIN = os.path.dirname(sys.executable)   # python3, dask, emst-dask of this environment


def _is_loopback(ip) -> bool:
    return ipaddress.ip_address(ip.split("%")[0]).is_loopback


def _listening(proc):
    """(ip, port) of the TCP sockets ``proc`` listens on."""
    try:
        return [(c.laddr.ip, c.laddr.port) for c in proc.net_connections("inet")
                if c.status == psutil.CONN_LISTEN]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


# --------------------------------------------------------------------------
# 16a: the embedded cluster's dashboard
# --------------------------------------------------------------------------
def test_embedded_cluster_dashboard_listens_on_loopback_only():
    """Defect 16a: today the dashboard's HTTP server listens on 0.0.0.0."""
    me = psutil.Process()
    earlier = {c.pid for c in me.children(recursive=True)}
    with emst_dask.EmbeddedCluster(backend="cpu") as emb:
        link = emb.dashboard_link
        assert link, "the embedded cluster serves a dashboard"
        url = urlparse(link)
        assert url.hostname in ("127.0.0.1", "localhost", "::1"), link
        port = url.port
        # the scheduler (and so its dashboard) runs in this process
        socks = [ip for ip, p in _listening(psutil.Process()) if p == port]
        assert socks, f"nothing of this process listens on the dashboard's port {port}"
        wide = [ip for ip in socks if not _is_loopback(ip)]
        assert wide == [], f"the dashboard {link} listens on {wide}"
        # and so does everything else of the cluster: scheduler, nannies, workers
        sched_port = urlparse(emb.client.scheduler.address).port
        ours = [me] + [c for c in me.children(recursive=True) if c.pid not in earlier]
        everything = [(pr.pid, ip, p) for pr in ours for ip, p in _listening(pr)
                      if pr.pid != me.pid or p in (port, sched_port)]
        assert [s for s in everything if not _is_loopback(s[1])] == [], everything


# --------------------------------------------------------------------------
# 16b: deploy/emst-cluster.sh start without --host
# --------------------------------------------------------------------------
def _deploy_env(**extra):
    """This environment's python/dask/emst-dask, the worktree's package, no
    EMST_/DASK_/SLURM variables of the caller (as tests/test_deploy.py)."""
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["NUMBA_NUM_THREADS"] = "1"
    for k in list(env):
        if k.startswith(("EMST_", "DASK_", "SLURM")):
            del env[k]
    env["EMST_PYTHON"] = sys.executable
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _group_members(pid_files):
    members = []
    for f in pid_files:
        if not os.path.exists(f):
            continue
        pg = int(open(f).read())
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(p.pid) == pg:
                    members.append(p)
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass
    return members


@pytest.mark.parametrize("dashboard", ["127.0.0.1:0", "none"])
def test_cluster_script_listens_on_loopback_by_default(tmp_path, dashboard):
    """Defect 16b: ``emst-cluster.sh start`` with neither ``--host`` nor
    ``--tls``: today ``dask scheduler`` and ``dask worker`` get no --host and
    listen with plain TCP on every interface (the scheduler file holds the
    machine's address).  Desired: 127.0.0.1 unless the user names a host or
    gives TLS -- every socket of the cluster's processes.

    With ``--dashboard none`` the scheduler and the workers still serve HTTP
    (/health, /metrics; distributed starts that server even with
    --no-dashboard) and today on 0.0.0.0 (the scheduler on :8787) even when
    --host is given: "no dashboard" must not mean "HTTP on every
    interface"."""
    env = _deploy_env()
    run_dir = tmp_path / "cluster"
    port = free_port()
    res = subprocess.run([CLUSTER, "start", "--dir", str(run_dir), "--cpu", "--workers", "1",
                          "--port", str(port), "--dashboard", dashboard, "--timeout", "120"],
                         env=env, capture_output=True, text=True, timeout=180)
    try:
        assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
        address = json.load(open(run_dir / "scheduler.json"))["address"]
        url = urlparse(address)
        assert url.scheme == "tcp" and url.port == port, address
        assert url.hostname in ("127.0.0.1", "localhost"), \
            f"the scheduler's address is {address}, not on the loopback interface"
        members = _group_members([run_dir / "scheduler.pid", run_dir / "worker.pid"])
        assert len(members) >= 3, "scheduler, worker CLI (nanny) and a worker"
        socks = [(p.pid, " ".join(p.cmdline()[:4]), ip, lport)
                 for p in members for ip, lport in _listening(p)]
        assert any(lport == port for *_, lport in socks), socks
        wide = [s for s in socks if not _is_loopback(s[2])]
        assert wide == [], f"listening beyond loopback: {wide}"
    finally:
        subprocess.run([CLUSTER, "stop", "--dir", str(run_dir)], env=env,
                       capture_output=True, text=True, timeout=120)


# --------------------------------------------------------------------------
# 16c: deploy/tls/make-certs.sh and the CA's private key
# --------------------------------------------------------------------------
def _openssl(*args):
    return subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)


def test_make_certs_keeps_the_ca_key_away_from_the_cluster_certificates(tmp_path):
    """Defect 16c: today ``make-certs.sh DIR`` writes ``DIR/ca-key.pem``
    beside the certificates that ``emst-cluster.sh --tls DIR`` hands to the
    scheduler and workers, so copying DIR to the nodes hands out the CA.

    Every directory holding the cluster's certificates (those of
    ``--tls DIR``: ca.pem, {scheduler,worker,client}.pem and -key.pem), and
    everything below it, is searched for a private key whose public key is
    the CA certificate's."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    certs = tmp_path / "certs"
    res = subprocess.run([MAKE_CERTS, str(certs), "node1"], capture_output=True, text=True,
                         timeout=120, env=_deploy_env())
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    # the layout emst-cluster.sh --tls DIR reads stays DIR
    for f in ("ca.pem", "scheduler.pem", "scheduler-key.pem", "worker.pem", "worker-key.pem",
              "client.pem", "client-key.pem"):
        assert (certs / f).is_file(), f
    ca_pub = _openssl("x509", "-in", str(certs / "ca.pem"), "-noout", "-pubkey")
    assert ca_pub.returncode == 0, ca_pub.stderr
    ca_pub = ca_pub.stdout.strip()

    cluster_dirs = {root for root, _, files in os.walk(tmp_path) if "scheduler.pem" in files}
    assert cluster_dirs == {str(certs)}, cluster_dirs
    found = []
    for top in cluster_dirs:
        for root, _, files in os.walk(top):
            for f in files:
                path = os.path.join(root, f)
                try:
                    text = open(path, errors="replace").read()
                except OSError:
                    continue
                if "PRIVATE KEY" not in text:
                    continue
                pub = _openssl("pkey", "-in", path, "-pubout")
                if pub.returncode == 0 and pub.stdout.strip() == ca_pub:
                    found.append(os.path.relpath(path, tmp_path))
    assert found == [], (f"the CA's private key is handed to the cluster with its "
                         f"certificates: {found}")
