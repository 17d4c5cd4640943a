"""Peak resident memory of this process (Linux: VmHWM), resettable, for the
benchmarks that record peak memory beside their seconds."""
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
