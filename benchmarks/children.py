"""Each tool of a benchmark in a process of its own (the scripts' --child)."""
from __future__ import annotations

import json
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
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        # a child that prints its row after each phase keeps the phases it finished
        print(f"{tool}: timed out", flush=True)
        row = _last_json(exc.stdout) or {}
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
