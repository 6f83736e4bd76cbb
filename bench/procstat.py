"""Machine-wide CPU counters from /proc/stat, shared by the harness and the
Dask side: they tell how much of a timed run other processes took."""
import os

_CLK = os.sysconf("SC_CLK_TCK")


def proc_stat():
    """(busy seconds, steal seconds) of the whole machine so far."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        user, nice, system, idle, iowait, irq, softirq, steal = v
        return (user + nice + system + irq + softirq) / _CLK, steal / _CLK
    except (OSError, ValueError):
        return 0.0, 0.0
