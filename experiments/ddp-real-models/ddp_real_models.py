#!/usr/bin/env python3
"""ResNet-18 and the GPT of examples/ (ddp_resnet18.py, ddp_gpt.py) through DDP with
every hook: no hook, torch's fp16 hook, torch's PowerSGD (ranks 1, 2, 4), the
AdaComp hook with its defaults and with our recommended settings per layer type.
Three parts, each resumable (a run whose summary exists is not run again):

    /usr/bin/python3 experiments/ddp-real-models/ddp_real_models.py accuracy [--models resnet18,gpt] [--seeds 0]
    sudo /usr/bin/python3 experiments/ddp-real-models/ddp_real_models.py speed [--hosts 4] [--links 100mbit,1gbit,unshaped]
    /usr/bin/python3 experiments/ddp-real-models/ddp_real_models.py report        # report.md + plots

accuracy: the whole (short) schedule of each model on loopback, 4 processes on
this machine (Gloo over 127.0.0.1), one per hook and seed, summaries in
experiments/ddp-real-models/data/accuracy/. speed: a few timed steps of the same schedule on the
namespace cluster (scripts/cluster.sh, one process per host, TCP between hosts)
per link rate and host count, summaries in experiments/ddp-real-models/data/speed/, with the
bytes each host's interface sent. report: per hook and link, time per step (and
its split), bytes per step, the final accuracy or held-out loss, steps to the
targets and the time to them = steps x the link's measured time per step (the
accuracy runs' own step times are loopback's); plus a check of that estimate on
one configuration (a whole schedule run on the cluster, `speed --full`), both for
the steps timed from the start and for those timed after a mid-schedule
checkpoint (`speed --from-step K`: the state at step K is trained on loopback
first, then the cluster times the steps after it, whose frames are nearer the
run's average than the first steps' are).

The schedules (sized for 2 shared cores; say so wherever a figure is quoted):
- resnet18: 4 processes x batch 16, 150 steps (9,600 images, 0.16 epoch), SGD
  momentum 0.9, lr 0.05, 5 % warm-up then cosine; evaluations every 25 steps on
  the first 2,000 test images.
- gpt: 4 layers, dim 320, 5 heads, context 128 (5.06M parameters); 4 processes x
  8 windows, 250 steps (1.0M training bytes seen); AdamW, lr 1e-3, warm-up 5 %,
  cosine to 0.1 x; evaluations every 25 steps on 64 held-out windows (8,192 bytes).
"""

import argparse
import json
import os
import platform
import shlex
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # resultslib
from resultslib.cluster import CLUSTER, counters, error_lines, log, sh  # noqa: E402
from resultslib.paths import ROOT, experiment, module_dir  # noqa: E402
from resultslib.runner import run_command  # noqa: E402
from resultslib.util import cores, cpu_name  # noqa: E402

PYTHON = "/usr/bin/python3"
OUT = experiment("ddp-real-models", "data")

MODELS = {
    "resnet18": {
        "script": "ddp_resnet18.py",
        "args": ["--batch-size", "16", "--steps", "150", "--eval-every", "25",
                 "--eval-images", "2000", "--log-every", "10"],
        # The speed runs' evaluations are cut to a token size (only the steps count).
        "speed_args": ["--eval-images", "256"],
        "metric": "accuracy",
        "lr": 0.05,  # the example's --lr default (the schedule's peak)
    },
    "gpt": {
        "script": "ddp_gpt.py",
        "args": ["--layers", "4", "--dim", "320", "--heads", "5", "--context", "128",
                 "--batch-size", "8", "--steps", "250", "--eval-every", "25",
                 "--eval-windows", "64", "--log-every", "10"],
        "speed_args": ["--eval-windows", "8"],
        "metric": "loss",
        "lr": 1e-3,  # the example's --lr default
    },
}
# The same ResNet-18 run twice as long: does the gap to no hook shrink with the
# schedule? (accuracy only: its steps time as resnet18's do)
MODELS["resnet18-long"] = dict(MODELS["resnet18"], args=[
    "300" if prev == "--steps" else a
    for prev, a in zip([None] + MODELS["resnet18"]["args"], MODELS["resnet18"]["args"])])

# The drop-in schedules: ResNet-18 for 600 steps (0.64 epoch), the GPT for 1,000 (4.1M
# training bytes seen), trained with each model's own hyper-parameters.
# Both are scored on the whole test set (all 10,000 test images; every held-out window,
# which the example caps at what the held-out split holds) every 100 steps.
MODELS["resnet18-600"] = dict(MODELS["resnet18"], args=[
    "600" if prev == "--steps" else "100" if prev == "--eval-every" else
    "10000" if prev == "--eval-images" else a
    for prev, a in zip([None] + MODELS["resnet18"]["args"], MODELS["resnet18"]["args"])])
MODELS["gpt-1000"] = dict(MODELS["gpt"], args=[
    "1000" if prev == "--steps" else "100" if prev == "--eval-every" else
    "1000000" if prev == "--eval-windows" else a
    for prev, a in zip([None] + MODELS["gpt"]["args"], MODELS["gpt"]["args"])])

# Our recommended settings per layer type (experiments/ddp-real-models/report.md says why): the
# norms' scales and shifts and the biases dense (0.1-0.3 % of the elements, and
# the tensors that compress worst), everything else at the defaults.
RECOMMENDED = ["--dense-types", "norm,other"]

HOOKS = {
    "none": ["--hook", "none"],
    # No hook without the gradient clip (which the local optimizer turns off on the GPT):
    # how much of the local optimizer's deficit is the clip's.
    "none-noclip": ["--hook", "none", "--clip", "0"],
    # No hook at the lr adacomp-local-clip-lr2 uses: is 2e-3 simply a better lr here?
    "none-lr2": ["--hook", "none", "--lr", "{2lr}"],
    # The local optimizer with the GPT's clip inside the hook: each rank clips its own
    # gradient (the model in one bucket) before its moments.
    "adacomp-local-clip": ["--hook", "adacomp", "--local-optimizer", "--local-clip", "1.0"],
    # The same at twice the lr: each rank's second moment, of a batch P times smaller,
    # is larger than the average's, so its steps are smaller than dense Adam's.
    "adacomp-local-clip-lr2": ["--hook", "adacomp", "--local-optimizer", "--local-clip", "1.0",
                               "--lr", "2e-3"],
    # The same with the transformer weights at twice the default bin size: local Adam's
    # steps are flatter than gradients, so at L_T 50 it sends twice the defaults' bytes.
    "adacomp-local-clip-lr2-l100": ["--hook", "adacomp", "--local-optimizer", "--local-clip",
                                    "1.0", "--lr", "2e-3", "--bin-sizes",
                                    "attention=100,mlp=100,embedding=100"],
    "fp16": ["--hook", "fp16"],
    "powersgd-r1": ["--hook", "powersgd", "--powersgd-rank", "1"],
    "powersgd-r2": ["--hook", "powersgd", "--powersgd-rank", "2"],
    "powersgd-r4": ["--hook", "powersgd", "--powersgd-rank", "4"],
    # PowerSGD as torch recommends it for the longer schedules: start_powerSGD_iter at 10 %
    # of the steps (the examples' default), error feedback and warm start on; rank 16
    # sends about what AdaComp sends.
    "powersgd-r8": ["--hook", "powersgd", "--powersgd-rank", "8"],
    "powersgd-r16": ["--hook", "powersgd", "--powersgd-rank", "16"],
    # adacomp.torch.DistributedOptimizer, the one call, with the script's own lr, schedule
    # and clip.
    "adacomp-one": ["--hook", "adacomp", "--one-call"],
    # The one call with SGD's velocity zeroed where a frame sent it (local_mask=True,
    # the one call's default until it was measured against no masking; Adam masks
    # nothing either way). adacomp-one-nomask: the runs that asked for no masking
    # before it became the default (the same as adacomp-one since).
    "adacomp-one-mask": ["--hook", "adacomp", "--one-call", "--mask"],
    "adacomp-one-nomask": ["--hook", "adacomp", "--one-call", "--no-mask"],
    # The GPT's one call at twice the script's lr: each rank's Adam divides by the
    # second moment of its own batch, 4x smaller than the average's; where batch noise
    # dominates its steps are up to sqrt(4) = 2x smaller than Adam's on the average.
    "adacomp-one-lr2": ["--hook", "adacomp", "--one-call", "--lr", "{2lr}"],
    # The one call as it was before it scaled local Adam's step by sqrt(world size)
    # (local_step_scale 1): each rank's own Adam step, at the script's lr and at 2x.
    "adacomp-one-unscaled": ["--hook", "adacomp", "--one-call", "--adam-step-scale", "1"],
    "adacomp-one-unscaled-lr2": ["--hook", "adacomp", "--one-call", "--adam-step-scale", "1",
                                 "--lr", "2e-3"],
    # Half the script's lr, no hook and the one call (a set-up the one call was not
    # chosen on).
    "none-lrhalf": ["--hook", "none", "--lr", "{lr/2}"],
    "adacomp-one-lrhalf": ["--hook", "adacomp", "--one-call", "--lr", "{lr/2}"],
    # Without a schedule: the script's lr from the first step to the last (no warm-up,
    # no cosine), no hook and the one call.
    "none-flat": ["--hook", "none", "--lr-floor", "1", "--warmup-frac", "0"],
    "adacomp-one-flat": ["--hook", "adacomp", "--one-call", "--lr-floor", "1",
                         "--warmup-frac", "0"],
    # The GPT without a schedule ended 0.11 nats/byte behind no hook: is it Adam's step
    # scaled by sqrt(P), 2x too large where the ranks' gradients agree (the first steps,
    # at the full lr without a warm-up)? The same without the scale.
    "adacomp-one-unscaled-flat": ["--hook", "adacomp", "--one-call", "--adam-step-scale", "1",
                                  "--lr-floor", "1", "--warmup-frac", "0"],
    # The one call's Adam default before the measured scale (local_step_scale="measured",
    # the default since 2026-12-07): a fixed sqrt(world size) = sqrt(4), at each set-up.
    "adacomp-one-sqrtp": ["--hook", "adacomp", "--one-call", "--adam-step-scale", "2"],
    "adacomp-one-sqrtp-lr2": ["--hook", "adacomp", "--one-call", "--adam-step-scale", "2",
                              "--lr", "{2lr}"],
    "adacomp-one-sqrtp-lrhalf": ["--hook", "adacomp", "--one-call", "--adam-step-scale", "2",
                                 "--lr", "{lr/2}"],
    "adacomp-one-sqrtp-flat": ["--hook", "adacomp", "--one-call", "--adam-step-scale", "2",
                               "--lr-floor", "1", "--warmup-frac", "0"],
    # The one call with auto=True: each step dense or compressed, whichever this run's
    # step times say is faster (docs/ddp-hook.md); and the paper's hook with it.
    "adacomp-one-auto": ["--hook", "adacomp", "--one-call", "--auto"],
    "adacomp-auto": ["--hook", "adacomp", "--auto"],
    "adacomp": ["--hook", "adacomp"],
    "adacomp-rec": ["--hook", "adacomp"] + RECOMMENDED,
    # The transformer weights at fc's bin size (what the hook did before they had
    # types of their own): the measurement behind their default of 50.
    "adacomp-l500": ["--hook", "adacomp", "--bin-sizes", "attention=500,mlp=500,embedding=500"],
    # A bin-size ramp from L_T 8 to the defaults over the first third of the schedule
    # (4 geometric stages): the early-lag remedy measured on the real models.
    "adacomp-ramp": ["--hook", "adacomp", "--ramp-start", "8", "--ramp-stages", "4",
                     "--ramp-steps", "{third}"],
    # A longer, lighter start: L_T 4 to the defaults over the first half (4 stages).
    "adacomp-ramp-half": ["--hook", "adacomp", "--ramp-start", "4", "--ramp-stages", "4",
                          "--ramp-steps", "{half}"],
    # Each rank keeps the optimizer's moments of its own gradient and compresses the
    # step (adacomp.torch.split_optimizer): SGD's velocity with masking, Adam's step.
    "adacomp-local": ["--hook", "adacomp", "--local-optimizer"],
    # The GPT's local optimizer at twice its learning rate: each rank's Adam second moment
    # is taken from its own batch, noisier than the average's, so its steps are smaller.
    "adacomp-local-lr2": ["--hook", "adacomp", "--local-optimizer", "--lr", "2e-3"],
    # Float32 for the first tenth of the steps (as torch's PowerSGD all-reduces its
    # first 10 %), then the defaults.
    "adacomp-dense": ["--hook", "adacomp", "--dense-warmup-steps", "{tenth}"],
    # Both: float32 for the first tenth (where every compressed run falls behind), then
    # the local optimizer; for Adam (the GPT) that is 1-bit Adam: the warm-up runs Adam
    # on the exact averages, then each rank's first moment goes over the frozen second
    # moment (no second moment of sparse averages, nor of one rank's small batch).
    "adacomp-dense-local": ["--hook", "adacomp", "--local-optimizer", "--dense-warmup-steps",
                            "{tenth}"],
    "adacomp-ramp-local": ["--hook", "adacomp", "--local-optimizer", "--ramp-start", "8",
                           "--ramp-stages", "4", "--ramp-steps", "{third}"],
    # The selected elements' values in binary16 instead of ternary (+-the bin's scale).
    "adacomp-fp16v": ["--hook", "adacomp", "--values", "fp16"],
    # Lighter compression all the way: the transformer weights (and conv/fc) at a
    # fixed L_T of 8 or 16 instead of 50 (the rate against accuracy on the GPT).
    "adacomp-l8": ["--hook", "adacomp", "--bin-sizes",
                   "attention=8,mlp=8,embedding=8,conv=8,fc=8"],
    "adacomp-l16": ["--hook", "adacomp", "--bin-sizes",
                    "attention=16,mlp=16,embedding=16,conv=16,fc=16"],
}
# The order runs go in: what the targets compare first, so a cut-short sweep has them.
ORDER = ("none", "adacomp", "powersgd-r1", "adacomp-rec", "powersgd-r4", "fp16", "powersgd-r2",
         "adacomp-ramp", "adacomp-ramp-half", "adacomp-local", "adacomp-ramp-local",
         "adacomp-fp16v", "adacomp-l8", "adacomp-l16", "adacomp-local-lr2",
         "adacomp-dense", "adacomp-dense-local", "none-noclip", "adacomp-local-clip",
         "adacomp-local-clip-lr2", "none-lr2", "adacomp-local-clip-lr2-l100", "adacomp-one",
         "powersgd-r8", "powersgd-r16", "adacomp-one-auto", "adacomp-auto", "adacomp-one-mask",
         "adacomp-one-nomask",
         "adacomp-one-lr2", "adacomp-one-unscaled", "adacomp-one-unscaled-lr2", "none-lrhalf",
         "adacomp-one-lrhalf", "none-flat", "adacomp-one-flat",
         "adacomp-one-unscaled-flat", "adacomp-one-sqrtp", "adacomp-one-sqrtp-lr2",
         "adacomp-one-sqrtp-lrhalf", "adacomp-one-sqrtp-flat")
PROCS = 4


def hook_args(hook, model):
    """The example's options for `hook` on `model` ({third}, {half}, {tenth}: that part of
    its steps; {2lr}, {lr/2}: twice and half its script's lr)."""
    steps = int(MODELS[model]["args"][MODELS[model]["args"].index("--steps") + 1])
    lr = MODELS[model]["lr"]
    return [a.replace("{third}", str(steps // 3)).replace("{half}", str(steps // 2))
            .replace("{tenth}", str(steps // 10)).replace("{2lr}", "%g" % (2 * lr))
            .replace("{lr/2}", "%g" % (lr / 2)) for a in HOOKS[hook]]


def machine():
    return f"{cores()} CPUs ({cpu_name('?')}); Python {platform.python_version()}"


def run_logged(cmd, timeout, env=None, log_path=None):
    """run_command, its output also written to log_path when one is given."""
    rc, out, wall = run_command(cmd, timeout=timeout, env=env)
    if log_path:
        with open(log_path, "w") as f:
            f.write(out)
    return rc, out, wall


def record_failure(path, cmd, rc, out):
    with open(path + ".failed", "w") as f:
        json.dump({"command": shlex.join(cmd), "rc": rc, "error": error_lines(out)}, f,
                  indent=1)


# ----- accuracy: whole schedules on loopback --------------------------------------------------

def resume_args(args, cmd, model, hook, seed):
    """A long run checkpoints at each evaluation into its own folder under
    --resume-root and, when that folder has one, resumes from it: a sweep cut short
    (a session's end) goes on where it stopped. Appends the options to cmd; returns the
    folder (None for PowerSGD, whose state torch cannot save) and whether it resumes."""
    if not args.resume_root or hook.startswith("powersgd"):
        return None, False
    margs = MODELS[model]["args"]
    ckdir = os.path.join(ROOT, args.resume_root, f"{model}_{hook}_s{seed}")
    cmd += ["--checkpoint-dir", ckdir,
            "--checkpoint-every", margs[margs.index("--eval-every") + 1]]
    resuming = os.path.exists(os.path.join(ckdir, "latest"))
    if resuming:
        cmd.append("--resume")
    return ckdir, resuming


def accuracy(args):
    outdir = os.path.join(args.out, "accuracy")
    os.makedirs(outdir, exist_ok=True)
    os.makedirs(args.log_dir, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=args.pythonpath, OMP_NUM_THREADS="1")
    models = args.models.split(",")
    hooks = [h for h in ORDER if h in args.hooks.split(",")]
    for seed in [int(s) for s in args.seeds.split(",")]:
        for hook in hooks:
            for model in models:
                m = MODELS[model]
                path = os.path.join(outdir, f"{model}_{hook}_s{seed}.json")
                if os.path.exists(path):
                    continue
                cmd = ([PYTHON, os.path.join(args.examples, m["script"]), "--procs",
                        str(PROCS), "--seed", str(seed)] + m["args"] +
                       hook_args(hook, model) + ["--summary-json", path + ".tmp"])
                if args.pg_timeout > 0:
                    cmd[-2:-2] = ["--timeout-s", str(args.pg_timeout)]
                recorded = shlex.join(["/usr/bin/python3", "examples/" + m["script"]]
                                      + cmd[2:-1] + [os.path.relpath(path, ROOT)])
                ckdir, resuming = resume_args(args, cmd, model, hook, seed)
                log(f"accuracy {model} {hook} seed {seed}"
                    + (f" (resumed from {ckdir})" if resuming else "") + " ...")
                rc, out, wall = run_logged(cmd, args.timeout, env,
                                           os.path.join(args.log_dir, f"acc_{model}_{hook}_s{seed}"))
                if rc == 0 and os.path.exists(path + ".tmp"):
                    with open(path + ".tmp") as f:
                        s = json.load(f)
                    s["command"] = recorded
                    s["machine"] = machine()
                    with open(path, "w") as f:
                        json.dump(s, f, indent=1)
                    os.remove(path + ".tmp")
                    if ckdir:
                        shutil.rmtree(ckdir, ignore_errors=True)
                    last = s["evals"][-1]
                    log(f"  {m['metric']} {last[m['metric']]:.4f}  "
                        f"{s['step_time_mean_s']:.3f} s/step  wall {wall:.0f} s")
                else:
                    record_failure(path, cmd, rc, out)
                    log(f"  FAILED (exit {rc}): {' / '.join(error_lines(out))}")


# ----- speed: timed steps on the cluster ----------------------------------------------------

def cluster_up(name, hosts, link):
    sh([CLUSTER, "--name", name, "down"], check=False)
    cmd = [CLUSTER, "--name", name, "up", str(hosts)]
    if link != "unshaped":
        cmd += ["--rate", link]
    r = sh(cmd, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)}: exit {r.returncode}: {(r.stdout + r.stderr).strip()}")


def checkpoint_dir(args, model, hook, hosts):
    """Where the state at step --from-step of this run goes: one per model, hook and host
    count, shared by every link (the training to it runs on loopback)."""
    return os.path.join(args.checkpoint_root, f"{model}_{hook}_P{hosts}_from{args.from_step}")


def make_checkpoint(args, model, hook, hosts, ckdir):
    """The state at step --from-step of the speed run's schedule, trained on loopback
    (hosts processes), for a speed run that times the steps after it: the frames of the
    first steps are larger than the run's average, so steps timed from step 0 overstate
    a compressed hook's time per step."""
    k = args.from_step
    if os.path.exists(os.path.join(ckdir, f"step-{k:08d}.rank0.pt")):
        return
    m = MODELS[model]
    cmd = ([PYTHON, os.path.join(args.examples, m["script"]), "--procs", str(hosts)] +
           m["args"] + hook_args(hook, model) + m["speed_args"] +
           (["--powersgd-start-iter", "2"] if hook.startswith("powersgd") else []) +
           ["--max-steps", str(k), "--warmup-steps", "2", "--checkpoint-dir", ckdir,
            "--checkpoint-every", str(k)])
    log(f"checkpoint at step {k} for {model} {hook} (loopback) ...")
    env = dict(os.environ, PYTHONPATH=args.pythonpath, OMP_NUM_THREADS="1")
    rc, out, wall = run_logged(cmd, args.timeout, env)
    if rc != 0:
        raise SystemExit(f"checkpoint run failed (exit {rc}): {' / '.join(error_lines(out))}")
    log(f"  done in {wall:.0f} s")


def speed(args):
    outdir = os.path.join(args.out, "speed")
    os.makedirs(outdir, exist_ok=True)
    os.makedirs(args.log_dir, exist_ok=True)
    port = args.port
    models = args.models.split(",")
    hooks = [h for h in ORDER if h in args.hooks.split(",")]
    for hosts in [int(h) for h in args.hosts.split(",")]:
        for link in args.links.split(","):
            todo = []
            for model in models:
                for hook in hooks:
                    tag = f"{model}_{hook}_P{hosts}_{link}" + (
                        "_full" if args.full else
                        f"_from{args.from_step}" if args.from_step else "")
                    path = os.path.join(outdir, tag + ".json")
                    if not os.path.exists(path):
                        todo.append((model, hook, path, tag))
            if not todo:
                continue
            if args.from_step:  # on loopback, before the cluster is up
                for model, hook, path, tag in todo:
                    make_checkpoint(args, model, hook, hosts,
                                    checkpoint_dir(args, model, hook, hosts))
            cluster_up(args.cluster_name, hosts, link)
            try:
                for model, hook, path, tag in todo:
                    m = MODELS[model]
                    logs = os.path.join(args.log_dir, tag)
                    os.makedirs(logs, exist_ok=True)
                    example = ([os.path.join(args.examples, m["script"])] + m["args"] +
                               hook_args(hook, model) + ["--summary-json", path + ".tmp"])
                    if not args.full:
                        example += m["speed_args"] + ["--max-steps", str(args.steps),
                                                      "--warmup-steps", "2"]
                        if hook.startswith("powersgd"):
                            example += ["--powersgd-start-iter", "2"]
                    if args.from_step:  # the steps after a mid-schedule checkpoint
                        k = args.from_step
                        example[example.index("--max-steps") + 1] = str(k + args.steps)
                        example[example.index("--warmup-steps") + 1] = str(k + 2)
                        example += ["--checkpoint-dir", checkpoint_dir(args, model, hook, hosts),
                                    "--resume", str(k)]
                    cmd = [CLUSTER, "--name", args.cluster_name, "run", "--each", "--timeout",
                           str(args.timeout), "--port", str(port), "--logs", logs, "--",
                           "env", f"PYTHONPATH={args.pythonpath}", "OMP_NUM_THREADS=1",
                           PYTHON] + example
                    port += 1
                    log(f"speed {tag} ...")
                    before = counters(args.cluster_name)
                    rc, out, wall = run_logged(cmd, args.timeout + 60)
                    after = counters(args.cluster_name)
                    for n in sorted(os.listdir(logs)):
                        with open(os.path.join(logs, n), errors="replace") as f:
                            out += f"\n--- {n}\n" + f.read()
                    if rc == 0 and os.path.exists(path + ".tmp"):
                        with open(path + ".tmp") as f:
                            s = json.load(f)
                        script = "examples/" + os.path.relpath(example[0], args.examples)
                        s.update(hosts=hosts, link=link, machine=machine(), wall_run_s=wall,
                                 command=shlex.join(["scripts/cluster.sh", "run", "--each", "--",
                                                     "/usr/bin/python3", script]
                                                    + example[1:-1]),
                                 link_run_tx_bytes=sum(after[h][1] - before[h][1]
                                                       for h in after if h in before))
                        with open(path, "w") as f:
                            json.dump(s, f, indent=1)
                        os.remove(path + ".tmp")
                        log(f"  {s['step_time_mean_s']:.3f} s/step  "
                            f"{s.get('link_tx_per_host_step', 0):,.0f} B/step/host on the link")
                    else:
                        record_failure(path, cmd, rc, out)
                        log(f"  FAILED (exit {rc}): {' / '.join(error_lines(out))}")
            finally:
                sh([CLUSTER, "--name", args.cluster_name, "down"], check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("accuracy", "speed", "report"))
    ap.add_argument("--models", default="resnet18,gpt")
    ap.add_argument("--hooks", default=",".join(ORDER))
    ap.add_argument("--seeds", default="0", help="accuracy: comma list")
    ap.add_argument("--hosts", default="4", help="speed: comma list of host counts")
    ap.add_argument("--links", default="100mbit,1gbit,unshaped", help="speed: comma list")
    ap.add_argument("--steps", type=int, default=12,
                    help="speed: steps per run (the first 2, PowerSGD's first 4, untimed)")
    ap.add_argument("--full", action="store_true",
                    help="speed: run the whole schedule (to check the time-to-target estimate)")
    ap.add_argument("--from-step", type=int, default=0,
                    help="speed: time the --steps steps after a checkpoint of this step "
                         "(trained on loopback first) instead of the schedule's first steps")
    ap.add_argument("--checkpoint-root", default="/tmp/ddp_real_checkpoints",
                    help="speed --from-step: where the checkpoints go (one folder per run)")
    ap.add_argument("--resume-root", default="",
                    help="accuracy: checkpoint each run at its evaluations under this folder "
                         "(relative to the repository root) and resume a cut-short run from it (not PowerSGD's)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    ap.add_argument("--pg-timeout", type=float, default=0,
                    help="accuracy: the runs' process-group timeout (--timeout-s; 0: the "
                         "example's 60 s); more keeps a long run alive through another "
                         "job's load on a shared machine")
    ap.add_argument("--cluster-name", default="ddpr")
    ap.add_argument("--port", type=int, default=29710)
    ap.add_argument("--examples", default=os.path.join(ROOT, "examples"),
                    help="the examples folder (a copy keeps a long sweep off a changing tree)")
    ap.add_argument("--pythonpath", default=module_dir())
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--log-dir", default="/tmp/ddp_real_logs")
    args = ap.parse_args()
    for m in args.models.split(","):
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; one of {', '.join(MODELS)}")
    for h in args.hooks.split(","):
        if h not in HOOKS:
            ap.error(f"unknown hook {h!r}; one of {', '.join(HOOKS)}")
    if args.from_step and (args.full or args.from_step < 0):
        ap.error("--from-step: a positive step, and not with --full")
    if args.part == "accuracy":
        accuracy(args)
    elif args.part == "speed":
        speed(args)
    else:
        import ddp_real_report
        ddp_real_report.main(args)


if __name__ == "__main__":
    main()
