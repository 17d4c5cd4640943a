"""Numba CPU kernels of the single-tree Borůvka EMST.

Each public function is one phase of the paper's algorithm.  All arrays live
in *tree order* (points sorted by Morton code); ``orig`` maps a tree position
to its input row and is the only thing the tie order looks at.

Conventions shared by every kernel here and by the CUDA kernels:

* distances are **squared** (``w = |x_i - x_j|^2``, or for mutual
  reachability ``max(core2_i, core2_j, |x_i - x_j|^2)``); the square root is
  taken once, on output.  Squaring is monotone, so the MST is the same.
* an edge compares by ``(w, min(orig_i, orig_j), max(orig_i, orig_j))``.  For
  a fixed query point ``i`` this reduces to ``(w, orig_j)``, which is what
  the searches use.
* ``dims`` is a tuple of d zeros: its length is a compile-time constant,
  so each dimension gets its own compiled kernels with the loops over the
  axes unrolled.
* child ids are *unified*: ``c < n`` is leaf (point) ``c``; ``c >= n`` is
  internal node ``c - n``.  Internal node 0 is the root.

The CPU has no cheap atomics, so the formulations avoid them: the radix tree
is built top-down (every internal node independently, Karras 2012), bottom-up
passes run over a precomputed children-before-parents order, label reduction
is a prefix count of label changes along the curve, and racy minimum updates
of a component's shared radius are allowed because every value written is the
weight of a real outgoing edge (a stale value is only a looser bound).

The kernels are split by stage: ``bvh`` (construction), ``search`` (k-NN,
bounds, nearest foreign point), ``components`` (labels, minima, merge);
``kernel_set`` binds them to the engine's phases (``CpuKernels``).
"""
