"""What the scripts share: the CPU's name as /proc/cpuinfo gives it, a run record's
machine as text, and matplotlib's pyplot (Agg, no display), or None with a message
when python3-matplotlib is missing."""

import os


def cpu_name(default="unknown"):
    """The "model name" of /proc/cpuinfo (the first CPU's), or ``default``."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default


def machine_name(record, default="?"):
    """A run record's machine ({"cpu": ..., "cores": ...}, as the cluster scripts write
    it) as "CPU, N cores"; a string is returned as it is."""
    m = record.get("machine", default)
    if isinstance(m, dict):
        m = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores"
    return m


def cores():
    return os.cpu_count() or 0


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (and a line saying so)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plots (apt-get install python3-matplotlib)")
        return None
    return plt
