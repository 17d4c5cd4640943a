"""Peak memory for the benchmarks that record it beside their seconds: the
resident memory of this process (Linux: VmHWM), resettable, and the most
bytes in use in CuPy's default memory pool during a call."""
from __future__ import annotations


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark of this process; False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    """Bytes of this process's peak resident set (VmHWM), 0 where unknown."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def device_peak_beyond(run):
    """``run()`` with a CuPy memory hook: (its result, the most bytes of the
    default memory pool in use during it beyond those in use before it,
    its result included).  The device is synchronised before and after."""
    import cupy
    from cupy.cuda import memory_hook

    pool = cupy.get_default_memory_pool()

    class Peak(memory_hook.MemoryHook):
        name = "peak"

        def __init__(self):
            self.peak = 0

        def malloc_postprocess(self, **kw):
            self.peak = max(self.peak, pool.used_bytes())

    cupy.cuda.Device().synchronize()
    held = pool.used_bytes()
    hook = Peak()
    with hook:
        result = run()
        cupy.cuda.Device().synchronize()
    return result, max(hook.peak - held, 0)
