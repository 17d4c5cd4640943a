"""Each tool of a benchmark in a process of its own (the scripts' --child)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time


def run_child(tool: str, cmd: list, timeout: float):
    """Run ``cmd`` (one tool's child process) and read the JSON of its last
    line of output.

    Returns
    -------
    (dict, bool)
        The row (with ``tool`` and ``process_seconds``), or a row with
        ``error`` (timed out, or the exit status and the end of stderr),
        printed; and whether the child succeeded.
    """
    t0 = time.perf_counter()
    # a session of its own: a child cut short takes its own workers (joblib's,
    # numba's) with it, which would otherwise keep the cores busy
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        r = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        # a child that prints its row after each phase keeps the phases it finished
        print(f"{tool}: timed out", flush=True)
        row = _last_json(out) or {}
        row.update(tool=tool, error=f"timed out after {timeout:.0f} s"
                   + (" (the figures here are of the phases it finished)" if row else ""))
        return row, False
    if r.returncode:
        print(f"{tool}: failed\n{r.stderr[-2000:]}", flush=True)
        return {"tool": tool, "error": r.stderr[-2000:]}, False
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res.update(tool=tool, process_seconds=time.perf_counter() - t0)
    return res, True


def _last_json(out) -> dict | None:
    """The last line of ``out`` (str, bytes or None) that is a JSON object."""
    if not out:
        return None
    if isinstance(out, bytes):
        out = out.decode(errors="replace")
    for line in reversed(out.strip().splitlines()):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            return row
    return None
