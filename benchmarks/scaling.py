"""Strong and weak scaling of the partitioned EMST over the GPUs of one host.

* strong: one cloud of ``--strong-n`` points, the one-GPU job against
  P = W boxes on W workers for every W of ``--gpus`` (one cluster each);
* weak: ``--weak-n`` points per GPU, the one-GPU job on ``--weak-n``
  points against P = W on ``W * --weak-n`` points.

Each part is one ``partitions.py`` run (a chunked snapshot made by all cores,
read by the workers, the edges written to an edge store, every tree
checked); this writes their rows side by side with the speed-up (strong:
one GPU's seconds over W GPUs') and the efficiency (weak: one GPU's seconds
over W GPUs'), in ``--out``.

    python benchmarks/scaling.py --gpus 1,2,4 --strong-n 1e9 --weak-n 5e8 \\
        --out benchmarks/results/scaling-h200x4.json
    python benchmarks/scaling.py --gpus 1,2 --strong-n 2e5 --weak-n 1e5 --backend cpu \\
        --out /tmp/scaling.json        # a small CPU try
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import partitions  # noqa: E402


def run(n: int, runs: str, args, name: str) -> list:
    """One ``partitions.py`` run; its rows."""
    out = os.path.join(args.dir, f"{name}.json")
    argv = ["--n", str(n), "--runs", runs, "--out-store", "--chunked",
            "--dataset", args.dataset, "--backend", args.backend, "--dir", args.dir,
            "--chunk-rows", str(args.chunk_rows), "--machine", args.machine, "--out", out]
    if args.memory_limit:
        argv += ["--memory-limit", args.memory_limit]
    if args.log_phases:
        argv += ["--log-phases"]
    if args.repeats > 1:
        argv += ["--repeats", str(args.repeats)]
    try:
        partitions.main(argv)
    finally:  # the next part's snapshot and store need the disk
        import shutil

        shutil.rmtree(os.path.join(args.dir, f"{args.dataset}3d-{n}.zarr"), ignore_errors=True)
        shutil.rmtree(os.path.join(args.dir, "edges.zarr"), ignore_errors=True)
    with open(out) as f:
        rows = json.load(f)["rows"]
    for r in rows:
        r["n"] = n
    return rows


def mode(w: int) -> str:
    return f"{w}:single" if w == 1 else f"{w}:{w}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", default="1,2,4", help="worker counts, one GPU each")
    ap.add_argument("--strong-n", type=float, default=None)
    ap.add_argument("--weak-n", type=float, default=None, help="points per GPU")
    ap.add_argument("--dataset", default="halos")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--chunk-rows", type=int, default=4_000_000)
    ap.add_argument("--memory-limit", default=None)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--machine", default="unknown")
    ap.add_argument("--log-phases", action="store_true")
    ap.add_argument("--repeats", type=int, default=1,
                    help="each job this many times, the last recorded (partitions.py)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    args.dir = args.dir or tempfile.mkdtemp(prefix="emst-scaling-")
    gpus = [int(w) for w in args.gpus.split(",")]
    result = dict(benchmark="scaling", machine=args.machine, dataset=args.dataset, gpus=gpus)

    def save():
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1, default=float)

    if args.strong_n:
        n = int(args.strong_n)
        rows = run(n, ",".join(mode(w) for w in gpus), args, "strong")
        one = next(r["seconds"] for r in rows if r["workers"] == 1)
        for r in rows:
            r["speedup_vs_one_gpu"] = one / r["seconds"]
        result["strong"] = dict(n=n, rows=rows)
        save()
    if args.weak_n:
        rows = []
        for w in gpus:
            rows += run(int(args.weak_n) * w, mode(w), args, f"weak-{w}")
        one = next(r["seconds"] for r in rows if r["workers"] == 1)
        for r in rows:
            r["efficiency_vs_one_gpu"] = one / r["seconds"]
        result["weak"] = dict(n_per_gpu=int(args.weak_n), rows=rows)
        save()
    for part in ("strong", "weak"):
        for r in result.get(part, {}).get("rows", []):
            extra = r.get("speedup_vs_one_gpu", r.get("efficiency_vs_one_gpu"))
            print(f"{part}: n={r['n']} W={r['workers']} {r['mode']}: {r['seconds']:.2f} s "
                  f"({extra:.2f}), spanning {r['spanning_tree']}", flush=True)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
