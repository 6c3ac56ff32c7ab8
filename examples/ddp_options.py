"""The options every DDP model script shares (examples/ddp_resnet18.py, ddp_gpt.py):
launch, hook, schedule length, timing, outputs, checkpoints, failure tests, and
their checks. Imported through ddp_common."""

from ddp_hooks import add_hook_args, check_ramp_and_local_args


def add_common_args(ap):
    """The options every model script has (launch, hook, schedule length, timing, outputs,
    checkpoints, failure tests)."""
    g = ap.add_argument_group("launch")
    g.add_argument("--procs", type=int, default=2,
                   help="DDP processes to spawn on 127.0.0.1 (default 2; ignored under a launcher)")
    g.add_argument("--port", type=int, default=0,
                   help="rendezvous port when spawning (0: pick a free one)")
    g.add_argument("--threads", type=int, default=1, help="torch threads per process")
    g.add_argument("--timeout-s", type=float, default=60.0,
                   help="Gloo process-group timeout: a rank that is gone or frozen makes the "
                        "others stop after at most this long (default 60; Gloo's own is 30 min)")
    g.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("steps")
    g.add_argument("--max-steps", type=int, default=0,
                   help="stop after this step (0: run the whole schedule); the lr schedule "
                        "still spans --steps")
    g.add_argument("--eval-every", type=int, default=0,
                   help="evaluate every N steps (0: at the start and the end only)")
    g.add_argument("--log-every", type=int, default=10, help="print a progress line every N steps")
    g.add_argument("--warmup-steps", type=int, default=2,
                   help="steps left out of the time per step (PowerSGD: counted from "
                        "start_powerSGD_iter)")
    add_hook_args(ap)
    g = ap.add_argument_group("outputs and checkpoints")
    g.add_argument("--summary-json", default="", help="rank 0 writes the run's figures here")
    g.add_argument("--checkpoint-dir", default="",
                   help="write checkpoints here (one file per rank and step)")
    g.add_argument("--checkpoint-every", type=int, default=0,
                   help="write a checkpoint every N steps (and at the end; 0: at the end only "
                        "when --checkpoint-dir is given)")
    g.add_argument("--resume", nargs="?", const="latest", default="",
                   help="resume from --checkpoint-dir: the newest checkpoint, or the one of "
                        "step N (--resume N)")
    g = ap.add_argument_group("failure tests")
    g.add_argument("--kill-rank", type=int, default=-1,
                   help="this rank kills itself with SIGKILL at --kill-at-step")
    g.add_argument("--kill-at-step", type=int, default=-1)
    g.add_argument("--freeze-rank", type=int, default=-1,
                   help="this rank stops itself with SIGSTOP at --freeze-at-step (a hung "
                        "host: its sockets stay open, nothing moves)")
    g.add_argument("--freeze-at-step", type=int, default=-1)


def check_common_args(ap, args):
    if args.no_overlap and args.hook != "adacomp":
        ap.error("--no-overlap applies to --hook adacomp only")
    if args.dense_warmup_steps and args.hook != "adacomp":
        ap.error("--dense-warmup-steps applies to --hook adacomp only")
    if args.dense_warmup_steps < 0:
        ap.error("--dense-warmup-steps must not be negative")
    if getattr(args, "auto", False) and (args.hook != "adacomp" or args.dense_warmup_steps):
        ap.error("--auto applies to --hook adacomp, without --dense-warmup-steps (it chooses "
                 "dense steps by itself)")
    check_ramp_and_local_args(ap, args)
    if args.resume and not args.checkpoint_dir:
        ap.error("--resume needs --checkpoint-dir")
    if args.resume and args.resume != "latest":
        try:
            if int(args.resume) < 0:
                raise ValueError
        except ValueError:
            ap.error(f"--resume takes a step number or nothing, not {args.resume!r}")
    if args.resume and args.hook == "powersgd":
        # PowerSGD's error feedback and warm-started P and Q are flat tensors in the order
        # of the gradients in DDP's bucket, and a new DDP uses another order in its first
        # step (before it rebuilds its buckets in the order gradients became ready), so a
        # restored PowerSGDState would not continue the run bit for bit.
        ap.error("--resume is not supported with --hook powersgd: torch's PowerSGD state is "
                 "laid out by DDP's bucket order, which a new DDP changes after its first "
                 "step, so the resumed run would not match the uninterrupted one")
    if args.timeout_s <= 0:
        ap.error("--timeout-s must be positive")
    if (args.kill_rank >= 0) != (args.kill_at_step >= 0):
        ap.error("--kill-rank and --kill-at-step go together")
    if (args.freeze_rank >= 0) != (args.freeze_at_step >= 0):
        ap.error("--freeze-rank and --freeze-at-step go together")
