"""The README's PyTorch example, run as a user would run it: the first
```python block of README.md written to a file and started with the system
interpreter (2 Gloo processes, the built module on PYTHONPATH, a free port in
place of the README's 29500). Each rank must print its line, the loss must
have fallen from the untrained ~2.3 (to below 1.5), the hook must have compressed, and both
ranks' weights must agree (the hook's average is bit-identical on every rank).
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

from ddp_test_util import free_port

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")
# Not anchored to lines: the two processes' lines may interleave in the pipe.
LINE = re.compile(r"rank (\d): loss ([0-9.]+), ([0-9]+)x, weights (-?[0-9]+\.[0-9]{9})")


def readme_python_block():
    with open(README) as f:
        text = f.read()
    m = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    if m is None:
        raise AssertionError("README.md has no ```python block")
    return m.group(1)


class ReadmeExampleTest(unittest.TestCase):
    def test_the_example_trains_compresses_and_keeps_replicas_equal(self):
        code = readme_python_block()
        self.assertIn("adacomp.torch.DistributedOptimizer(ddp, opt)", code)
        self.assertIn("29500", code)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "example.py")
            with open(path, "w") as f:
                f.write(code.replace("29500", str(free_port())))
            p = subprocess.run([sys.executable, path], capture_output=True, text=True,
                               timeout=240, cwd=d)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = {int(m.group(1)): m for m in LINE.finditer(p.stdout)}
        self.assertEqual(sorted(lines), [0, 1], p.stdout)
        for rank, m in lines.items():
            self.assertLess(float(m.group(2)), 1.5, f"rank {rank} did not learn: {m.group(0)}")
            self.assertGreaterEqual(int(m.group(3)), 20, f"rank {rank}: {m.group(0)}")
        self.assertEqual(lines[0].group(4), lines[1].group(4), "replicas differ")


if __name__ == "__main__":
    unittest.main()
