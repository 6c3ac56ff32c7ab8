"""examples/ddp_resnet18.py and examples/ddp_gpt.py, shrunk (--width / --layers --dim
--heads --context), each run for a few steps on 2 Gloo processes: the replicas end
bit-identical, the held-out loss falls, the summary JSON has every field, a run
resumed from a mid-run checkpoint ends on the uninterrupted run's weights bit for
bit (AdaComp hook), and a rank killed or frozen mid-run makes the other stop with an
error naming it within the process-group timeout (the frozen one under torchrun,
whose last checkpoint then resumes to the uninterrupted run's weights)."""

import json
import os
import shutil
import subprocess
import sys
import signal
import tempfile
import threading
import time
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
sys.path.insert(0, EXAMPLES)
import ddp_common  # noqa: E402
from ddp_test_util import free_port  # noqa: E402

PYTHON = sys.executable
RUN_TIMEOUT = 240  # seconds for one example run (2 processes on a shared 2-core machine)

SUMMARY_KEYS = (
    "model", "config", "parameters", "hook", "title", "world", "batch_size", "steps_total",
    "steps", "resumed_from", "seed", "skipped", "bucket_cap_mb", "evals", "train",
    "untimed_steps", "timed_steps", "step_time_mean_s", "step_time_median_s",
    "step_time_split_mean_s", "bytes_per_step", "bytes_how", "compression", "wall_s",
    "weights_digests", "powersgd")


def run_example(script, args, env_extra=None):
    """Runs an example (it spawns its ranks); returns the CompletedProcess."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.update(env_extra or {})
    return subprocess.run([PYTHON, os.path.join(EXAMPLES, script)] + args, env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)


class RealModelCase:
    """What both models are tested for; subclasses name the script and its small size."""

    script = None
    size_args = ()
    steps = 12
    checkpoint_at = 6
    hook_args = ("--hook", "adacomp")

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="adacomp-real-")
        cls.full_dir = os.path.join(cls.tmp, "full")
        cls.resumed_dir = os.path.join(cls.tmp, "resumed")
        base = list(cls.size_args) + list(cls.hook_args) + ["--steps", str(cls.steps),
                                                              "--log-every", "3", "--procs", "2"]
        cls.base = base
        cls.full = run_example(cls.script, base + [
            "--summary-json", os.path.join(cls.tmp, "full.json"),
            "--checkpoint-dir", cls.full_dir, "--checkpoint-every", str(cls.checkpoint_at)])
        cls.summary = cls._summary(cls.full, "full.json")
        # The resumed run sees only the mid-run checkpoint (as after a crash there).
        os.makedirs(cls.resumed_dir)
        for name in os.listdir(cls.full_dir):
            if name.startswith(f"step-{cls.checkpoint_at:08d}."):
                shutil.copy(os.path.join(cls.full_dir, name), cls.resumed_dir)
        with open(os.path.join(cls.resumed_dir, "latest"), "w") as f:
            f.write(f"{cls.checkpoint_at}\n")
        cls.resumed = run_example(cls.script, base + [
            "--summary-json", os.path.join(cls.tmp, "resumed.json"),
            "--checkpoint-dir", cls.resumed_dir, "--resume"])
        cls.resumed_summary = cls._summary(cls.resumed, "resumed.json")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def _summary(cls, proc, name):
        path = os.path.join(cls.tmp, name)
        if proc.returncode != 0 or not os.path.exists(path):
            return {"failed": f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"}
        with open(path) as f:
            return json.load(f)

    def ok(self, summary):
        self.assertNotIn("failed", summary, summary.get("failed"))
        return summary

    def test_replicas_identical(self):
        s = self.ok(self.summary)
        digests = s["weights_digests"]
        self.assertEqual(len(digests), 2)
        self.assertTrue(all(isinstance(d, str) and len(d) == 64 for d in digests), digests)
        self.assertEqual(digests[0], digests[1], "the two ranks' weights differ")

    def test_loss_falls(self):
        s = self.ok(self.summary)
        evals = s["evals"]
        self.assertEqual([e["step"] for e in evals], [0, self.steps])
        self.assertLess(evals[-1]["loss"], evals[0]["loss"] - 0.1, evals)
        train = s["train"]
        self.assertLess(train[-1]["loss"], train[0]["loss"], train)

    def test_summary_fields(self):
        s = self.ok(self.summary)
        for k in SUMMARY_KEYS:
            self.assertIn(k, s)
        self.assertEqual(s["world"], 2)
        self.assertEqual(s["steps"], self.steps)
        self.assertEqual(s["steps_total"], self.steps)
        self.assertIsNone(s["resumed_from"])
        self.assertEqual(s["timed_steps"], self.steps - s["untimed_steps"])
        self.assertGreater(s["step_time_mean_s"], 0)
        split = s["step_time_split_mean_s"]
        self.assertEqual(set(split), {"forward", "backward", "optimizer", "hook"})
        self.assertLessEqual(split["forward"] + split["backward"] + split["optimizer"],
                             s["step_time_mean_s"] * 1.0001)
        self.assertGreater(s["bytes_per_step"], 0)
        # AdaComp sends far fewer bytes than the 4-byte dense gradient.
        self.assertLess(s["bytes_per_step"], 4 * s["parameters"] / 5)
        rates = s["compression"]
        self.assertGreater(rates["end_to_end"], 5)
        self.assertTrue(rates["per_type"])
        for t, v in rates["per_type"].items():
            self.assertIn(t, ddp_common.LAYER_TYPES)
            self.assertGreater(v["compression_rate"], 1, t)
        for e in s["evals"]:
            self.assertGreaterEqual(e["wall_s"], 0)
            self.assertIn("loss", e)
        self.assertLessEqual(s["evals"][0]["wall_s"], s["evals"][-1]["wall_s"])
        self.assertEqual([t["step"] for t in s["train"]], list(range(3, self.steps + 1, 3)))
        self.assertIn(f"final: step {self.steps}", self.full.stdout)

    def test_resume_is_bit_exact(self):
        s = self.ok(self.summary)
        r = self.ok(self.resumed_summary)
        self.assertEqual(r["resumed_from"], self.checkpoint_at)
        self.assertEqual(r["steps"], self.steps)
        self.assertEqual(r["timed_steps"], self.steps - max(self.checkpoint_at, r["untimed_steps"]))
        # The checkpoint holds other weights than the end, so equality below means something.
        mid = torch.load(os.path.join(self.full_dir, f"step-{self.checkpoint_at:08d}.rank0.pt"))
        self.assertEqual(mid["step"], self.checkpoint_at)
        self.assertIn("adacomp", mid["hook"])
        self.assertNotEqual(ddp_common.state_digest(mid["model"]), s["weights_digests"][0])
        self.assertEqual(r["weights_digests"], s["weights_digests"])
        self.assertEqual(r["evals"][-1]["loss"], s["evals"][-1]["loss"])
        # The evaluations before the checkpoint come from it.
        self.assertEqual(r["evals"][0], s["evals"][0])
        end = torch.load(os.path.join(self.resumed_dir, f"step-{self.steps:08d}.rank1.pt"))
        ref = torch.load(os.path.join(self.full_dir, f"step-{self.steps:08d}.rank1.pt"))
        # Rank 1's residues too, not only the weights.
        self.assertEqual(end["hook"]["adacomp"]["params"].keys(),
                         ref["hook"]["adacomp"]["params"].keys())
        for name, d in ref["hook"]["adacomp"]["params"].items():
            self.assertEqual(end["hook"]["adacomp"]["params"][name], d, name)
        for k, v in ref["optimizer"]["state"].items():
            for kk, t in v.items():
                if torch.is_tensor(t):
                    self.assertTrue(torch.equal(end["optimizer"]["state"][k][kk], t), (k, kk))
        # A local optimizer's moments (in the hook's state) too.
        local = ref["hook"]["adacomp"].get("local_optimizer")
        self.assertEqual(local is not None, "--local-optimizer" in self.hook_args)
        if local is not None:
            self.assertEqual(end["hook"]["adacomp"]["local_optimizer"]["steps"], self.steps)
            for part in ("first", "second"):
                mine = end["hook"]["adacomp"]["local_optimizer"][part]
                self.assertEqual(mine.keys(), local[part].keys())
                for name, t in local[part].items():
                    self.assertTrue(torch.equal(mine[name], t), (part, name))


class ResNet18Test(RealModelCase, unittest.TestCase):
    script = "ddp_resnet18.py"
    size_args = ("--width", "8", "--batch-size", "16", "--train-limit", "4000",
                 "--eval-images", "500", "--lr", "0.02")

    def test_powersgd_and_its_refused_resume(self):
        """PowerSGD in one bucket: runs, replicas identical, fewer bytes than dense; and
        --resume with it is refused before any rank starts."""
        out = os.path.join(self.tmp, "psgd.json")
        p = run_example(self.script, list(self.size_args) + [
            "--hook", "powersgd", "--steps", "6", "--powersgd-start-iter", "2",
            "--warmup-steps", "1", "--summary-json", out])
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        with open(out) as f:
            s = json.load(f)
        self.assertEqual(s["weights_digests"][0], s["weights_digests"][1])
        size_mb = 4 * s["parameters"] / 2**20
        self.assertGreater(s["bucket_cap_mb"], size_mb)
        self.assertLess(s["bytes_per_step"], 4 * s["parameters"] / 5)
        self.assertEqual(s["powersgd"]["start_powerSGD_iter"], 2)
        p = run_example(self.script, list(self.size_args) + [
            "--hook", "powersgd", "--checkpoint-dir", self.full_dir, "--resume"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--resume is not supported with --hook powersgd", p.stderr)


class GptTest(RealModelCase, unittest.TestCase):
    script = "ddp_gpt.py"
    size_args = ("--layers", "2", "--dim", "32", "--heads", "2", "--context", "32",
                 "--batch-size", "8", "--eval-windows", "16", "--lr", "3e-3")

    def test_killed_rank_stops_the_other(self):
        """Ranks started as a launcher would (env://); rank 1 kills itself at step 3 of 400;
        rank 0 exits non-zero within the 20 s process-group timeout, naming the cause."""
        port = str(free_port())
        args = [PYTHON, os.path.join(EXAMPLES, self.script)] + list(self.size_args) + [
            "--steps", "400", "--log-every", "100", "--timeout-s", "20",
            "--kill-rank", "1", "--kill-at-step", "3"]
        procs = []
        t0 = time.monotonic()
        for rank in (1, 0):
            env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=port, WORLD_SIZE="2", RANK=str(rank))
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        try:
            out1, err1 = procs[0].communicate(timeout=RUN_TIMEOUT)
            out0, err0 = procs[1].communicate(timeout=RUN_TIMEOUT)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        elapsed = time.monotonic() - t0
        self.assertEqual(procs[0].returncode, -9, err1[-2000:])
        self.assertIn("killing myself at step 3", err1)
        self.assertEqual(procs[1].returncode, 2, err0[-2000:])
        self.assertIn("rank 0: step 3: ", err0)
        # The heartbeats name the rank.
        self.assertIn("rank 1 stopped: its heartbeat did not move", err0)
        self.assertNotIn("final:", out0)
        # Start-up included, well before the 400 steps could have run at ~30 ms each.
        self.assertLess(elapsed, 60, err0[-2000:])

    def test_frozen_rank_under_torchrun(self):
        """torchrun starts 2 ranks of 400 steps with a checkpoint every 2; rank 1 stops
        itself with SIGSTOP at step 3 (a hung host: sockets open, nothing moves). Rank 0
        exits within 60 s of the freeze (20 s process-group timeout), naming rank 1; the
        checkpoint of step 2, hook state included, resumes to the uninterrupted run's
        weights at step 6."""
        ckpt = os.path.join(self.tmp, "frozen")
        common = list(self.size_args) + list(self.hook_args) + [
            "--steps", "400", "--log-every", "100"]
        # --redirects/--tee as mappings: torch 1.13's torchrun cannot parse their
        # default on Python 3.11 (python/README.md).
        cmd = [PYTHON, "-m", "torch.distributed.run", "--redirects", "9:0", "--tee", "9:0",
               "--nproc_per_node", "2",
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
               os.path.join(EXAMPLES, self.script)] + common + [
            "--timeout-s", "20", "--freeze-rank", "1", "--freeze-at-step", "3",
            "--checkpoint-dir", ckpt, "--checkpoint-every", "2"]
        proc = subprocess.Popen(cmd, env=dict(os.environ, OMP_NUM_THREADS="1",
                                              GLOO_SOCKET_IFNAME="lo"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines, frozen = [], {}

        def read():
            for line in proc.stderr:
                lines.append((time.monotonic(), line))
                if "freezing at step 3" in line:
                    frozen["pid"] = int(line.rsplit("pid", 1)[1])
                    frozen["at"] = time.monotonic()
                if line.startswith("rank 0: step 3: ") and "pid" in frozen:
                    frozen["reported"] = time.monotonic()
                    # What an operator would do next: end the hung process, so that
                    # torchrun need not wait out its 30 s of SIGTERM grace.
                    os.kill(frozen["pid"], signal.SIGKILL)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=RUN_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if "pid" in frozen and "reported" not in frozen:
                try:
                    os.kill(frozen["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
            reader.join(10)
            proc.stderr.close()
        err = "".join(line for _, line in lines)
        self.assertIn("pid", frozen, err[-3000:])
        self.assertIn("reported", frozen, err[-3000:])
        self.assertNotEqual(proc.returncode, 0)
        self.assertLess(frozen["reported"] - frozen["at"], 60, err[-3000:])
        report = next(line for _, line in lines if line.startswith("rank 0: step 3: "))
        self.assertIn("rank 1 stopped: its heartbeat did not move", report)
        self.assertIn("process-group timeout 20 s", report)
        with open(os.path.join(ckpt, "latest")) as f:
            self.assertEqual(f.read().strip(), "2")
        # The last checkpoint resumes to the weights of a run never interrupted.
        tail = ["--procs", "2", "--max-steps", "6"]
        resumed = run_example(self.script, common + tail + [
            "--checkpoint-dir", ckpt, "--resume",
            "--summary-json", os.path.join(self.tmp, "after_freeze.json")])
        whole = run_example(self.script, common + tail + [
            "--summary-json", os.path.join(self.tmp, "unfrozen.json")])
        r = self.ok(self._summary(resumed, "after_freeze.json"))
        w = self.ok(self._summary(whole, "unfrozen.json"))
        self.assertEqual(r["resumed_from"], 2)
        self.assertEqual(r["steps"], 6)
        self.assertEqual(r["weights_digests"], w["weights_digests"])


class ResNet18LocalOptimizerTest(RealModelCase, unittest.TestCase):
    """The AdaComp hook with a local optimizer (SGD's velocity, masked) on ResNet-18."""
    script = ResNet18Test.script
    size_args = ResNet18Test.size_args
    hook_args = ("--hook", "adacomp", "--local-optimizer")


class GptLocalOptimizerTest(RealModelCase, unittest.TestCase):
    """The AdaComp hook with a local optimizer on the GPT, as experiments/ddp-real-models/report.md
    recommends it (the clip inside the hook, the model in one bucket), after a dense
    warm-up: 1-bit Adam, whose frozen second moment the resumed run must carry."""
    script = GptTest.script
    size_args = GptTest.size_args
    hook_args = ("--hook", "adacomp", "--local-optimizer", "--local-clip", "1.0",
                 "--dense-warmup-steps", "2")


class AdamStepScaleOptionTest(unittest.TestCase):
    """--adam-step-scale: refused without Adam on each rank, or when not a number > 0,
    before any rank starts."""

    def test_refusals(self):
        for args, says in ((["--hook", "adacomp", "--adam-step-scale", "2"],
                            "goes with --local-optimizer or --one-call"),
                           (["--hook", "adacomp", "--one-call", "--adam-step-scale", "0"],
                            "finite number > 0"),
                           (["--hook", "adacomp", "--one-call", "--adam-step-scale", "nan"],
                            "finite number > 0")):
            proc = run_example("ddp_gpt.py", args)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(says, proc.stderr)


class LrScheduleTest(unittest.TestCase):
    """The examples' lr factor (ddp_common.WarmupCosine), against its definition written
    here: a linear warm-up to 1, then a cosine to the floor at the last step; the
    ResNet-18 example's --lr-floor 1 --warmup-frac 0 is a constant lr."""

    def test_against_the_definition(self):
        import math
        for warmup, total, floor in ((5, 100, 0.0), (5, 100, 0.1), (1, 50, 1.0), (10, 10, 0.0)):
            f = ddp_common.WarmupCosine(warmup, total, floor)
            for s in range(total + 3):
                if s < warmup:
                    want = (s + 1) / warmup
                else:
                    p = min(1.0, (s - warmup) / max(1, total - warmup))
                    want = floor + (1 - floor) * (1 + math.cos(math.pi * p)) / 2
                self.assertAlmostEqual(f(s), want, places=12, msg=(warmup, total, floor, s))
            self.assertAlmostEqual(f(total), floor if total > warmup else 1.0, places=12)

    def test_resnet_constant_lr(self):
        import argparse
        import ddp_resnet18
        args = argparse.Namespace(lr=0.05, lr_floor=1.0, warmup_frac=0.0, weight_decay=5e-4,
                                  steps=600, epochs=1, batch_size=16, train_limit=0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Linear(4, 2))
        task = ddp_resnet18.ResNetTask.__new__(ddp_resnet18.ResNetTask)
        opt, factor = task.make_optimizer(model, args, 600)
        self.assertEqual([factor(s) for s in (0, 1, 299, 599, 600)], [1.0] * 5)
        cosine = argparse.Namespace(**{**vars(args), "lr_floor": 0.0, "warmup_frac": 0.05})
        opt, factor = task.make_optimizer(model, cosine, 600)
        self.assertEqual(factor(599 + 1), 0.0)
        self.assertLess(factor(0), 0.1)


if __name__ == "__main__":
    unittest.main()

