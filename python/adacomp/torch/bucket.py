"""One bucket's data: which slice of it is which parameter's (_layout), the float32
copy it is compressed from and decoded into (_working_copy), the check for
non-finite gradients, and the average of every rank's frames written over it."""

import torch

from .. import FrameError, _adacomp


def _working_copy(buf, index):
    """The float32 CPU tensor the bucket is compressed from and decoded into."""
    if buf.device.type != "cpu":
        raise ValueError(f"adacomp hook: bucket {index} is on {buf.device}; this build "
                         f"compresses CPU tensors only (use the Gloo backend with CPU "
                         f"gradients)")
    if buf.is_sparse or not buf.is_contiguous():
        raise ValueError(f"adacomp hook: bucket {index} is not a dense contiguous tensor")
    if buf.numel() == 0:
        raise ValueError(f"adacomp hook: bucket {index} is empty")
    if buf.dtype == torch.float32:
        return buf.detach()
    if buf.dtype in (torch.float16, torch.bfloat16):
        return buf.detach().float()  # residues stay float32; the result is rounded back
    raise ValueError(f"adacomp hook: bucket {index} holds {buf.dtype} gradients; the hook "
                     f"compresses float32, float16 and bfloat16")


def _layout(bucket, buf, entry):
    """[(entry, offset, numel)] of the bucket's parameters, in bucket order (entry:
    AdaCompState._entry, which gives a parameter's _Entry)."""
    params = bucket.parameters()
    grads = bucket.gradients()
    total = buf.numel()
    layout = []
    views_ok = len(grads) == len(params)
    if views_ok:
        base = buf.data_ptr()
        size = buf.element_size()
        for p, g in zip(params, grads):
            delta = g.data_ptr() - base
            if (delta % size or not g.is_contiguous() or g.numel() != p.numel()
                    or delta // size + g.numel() > total or delta < 0):
                views_ok = False
                break
            layout.append((entry(p), delta // size, p.numel()))
    if not views_ok:  # DDP lays the bucket out in parameter order without gaps
        layout, off = [], 0
        for p in params:
            layout.append((entry(p), off, p.numel()))
            off += p.numel()
        if off != total:
            raise RuntimeError(f"adacomp: bucket {bucket.index()} holds {total} elements, its "
                               f"parameters {off}; cannot map gradients to parameters")
    return [x for x in layout if x[2] > 0]


def _non_finite(g, e):
    """The error for the first non-finite element of ``g`` (parameter entry e's slice
    of the bucket), or None if all are finite. Used on the failure path only: the
    compressors check their own slices."""
    bad = _adacomp.find_non_finite(g)
    if bad is None:
        return None
    return ValueError(f"adacomp hook: non-finite gradient ({float(g[bad])}) in parameter "
                      f"{e.name!r}, element {bad}")


def _zero_gaps(arr, layout):
    """Zeroes the elements of the bucket outside every parameter's slice."""
    covered = 0
    for _, off, n in sorted(layout, key=lambda x: x[1]):
        if off > covered:
            arr[covered:off] = 0
        covered = max(covered, off + n)
    if covered < arr.size:
        arr[covered:] = 0


def _average(ex, received, counters):
    """Writes the average of every rank's frames over the bucket (ex.buf) and counts
    them in counters (the step's, per layer type); raises on a frame that fails to
    decode. received: [(rank, header, memoryview of its frames)] in rank order."""
    for (e, _, _), s in zip(ex.layout, ex.stats):
        counters[e.layer_type].add_compress(s)
    arr = ex.work.numpy()
    # Per parameter, the average of every rank's frame in rank order: bit for bit
    # zeroing the slice, adding the frames rank after rank and dividing by the world
    # size. The gradient is not state: on a failure below the step is skipped.
    _zero_gaps(arr, ex.layout)
    views = [v for _, _, v in received]
    if ex.layout:
        # Every rank's message (its frames, one per parameter in bucket order) at
        # once: all frames and the absence of leftover bytes are checked before
        # any slice is written.
        try:
            used = _adacomp.decompress_average_messages(
                views, [arr[off:off + n] for _, off, n in ex.layout],
                [e.tensor_id for e, _, _ in ex.layout])
        except (FrameError, ValueError) as exc:
            r, k = getattr(exc, "message", None), getattr(exc, "tensor", None)
            if r is None:
                raise
            if k < len(ex.layout):
                where = f"parameter {ex.layout[k][0].name!r}"
            else:
                where = "after the last parameter's frame"
            raise type(exc)(f"rank {r}, bucket {ex.index}, {where}: {exc}") from None
        ex.wire_bytes = {}
        for (e, _, n), lengths in zip(ex.layout, used):
            c = counters[e.layer_type]
            c.gathered_elements += n * len(views)
            c.gathered_bytes += sum(lengths)
            ex.wire_bytes[id(e)] = sum(lengths)
    else:
        for r, v in enumerate(views):
            if len(v):
                raise FrameError(f"rank {r}, bucket {ex.index}: {len(v)} bytes for a "
                                 f"bucket without parameters")
    if ex.work.data_ptr() != ex.buf.data_ptr():  # a float16 / bfloat16 bucket's copy
        ex.buf.copy_(ex.work)


def _compress(st, ex, arr):
    """Every parameter's frame of bucket ex for state st's step, in layout order, from
    the working copy arr: (frames, None), or (the frames so far, the error).

    Dense warm-up steps send float32 frames and touch no residue: the gradient, or with
    a local optimizer its local step, except local Adam's, which sends the gradient
    whose average becomes the Adam step after the exchange (ex.average_step). (auto's
    dense steps do not come here: dense_sum.py.) Later steps go through each parameter's compressor at the step's bin size, and the local
    optimizer if any. Every codec checks its input for non-finite elements before it
    changes anything, so no pass of its own here: a non-finite element fails the
    parameter's compress, and the step's rollback undoes the ones before it."""
    frames = []
    dense = st._schedule.is_dense(st.steps)
    local = st._local
    ex.average_step = dense and local is not None and local.kind == "adam"
    if local is not None and not ex.average_step:
        local.clip(arr, ex.layout, ex.index)  # (an average_step clips the average instead)
    if not dense:
        st._snapshot(ex.layout)
    used = None if st._usage is None else st._usage.take(ex.layout)
    for e, off, n in ex.layout:
        g = arr[off:off + n]
        comp = st._schedule.dense_compressor(e) if dense else e.compressor
        if used is not None and id(e.param) not in used:  # unused here: send nothing of it
            frame, stats = st._usage.empty_frame(e, comp)
            frames.append(frame)
            ex.stats.append(stats)
            continue
        try:
            if not dense:
                st._schedule.apply(e, st.steps, st._bin_sizes[e.layer_type])
            if local is None or ex.average_step:
                frames.append(comp.compress(g))
            else:
                frames.append(local.compress(e, g, comp if dense else None))
        except Exception as exc:
            # A non-finite element in this parameter's slice: the message names it.
            return frames, (_non_finite(g, e) or type(exc)(
                f"adacomp hook: parameter {e.name!r}: {exc}"))
        ex.stats.append(comp.last_stats)
    return frames, None
