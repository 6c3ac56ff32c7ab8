"""The compression schedule of the hook: the first dense_warmup_steps steps uncompressed, then
the bin size each parameter is sent at in a step, from the geometric ramp
(ramp_steps, ramp_start, ramp_stages) and the adaptive part (adapt_threshold, ...:
adacomp/schedule.h through _BinScheduler), and the averaged-gradient norms the
adaptive part observes."""

from .. import Compressor, _adacomp


class _Schedule:
    """Settings, checked at construction (ValueError naming the field), and the
    adaptive part's state once the parameters are known (build())."""

    def __init__(self, codec, model_given, ramp_steps=0, ramp_start=8, ramp_stages=4,
                 adapt_threshold=0.0, adapt_window=16, adapt_hold=32, adapt_bin_size=0,
                 dense_warmup_steps=0):
        warm = dense_warmup_steps
        if isinstance(warm, bool) or int(warm) != warm or warm < 0:
            raise ValueError(f"dense_warmup_steps must be a whole number >= 0, not {warm!r}")
        self.dense_warmup_steps = int(warm)
        self._dense = {}  # tensor id -> its float32 ("dense" codec) compressor for the warm-up
        self.ramp_steps, self.ramp_start, self.ramp_stages = (
            int(ramp_steps), int(ramp_start), int(ramp_stages))
        if self.ramp_steps:
            if codec != "adacomp":
                raise ValueError(f"ramp_steps needs codec 'adacomp', not {codec!r}")
            # The trainer's checks of the settings (ValueError naming the field).
            _adacomp.ramp_bin_size(1, 0, self.ramp_steps, self.ramp_start, self.ramp_stages)
        self.adapt = dict(adapt_threshold=float(adapt_threshold),
                          adapt_window=int(adapt_window), adapt_hold=int(adapt_hold),
                          adapt_bin_size=int(adapt_bin_size))
        if self.adaptive:
            if codec != "adacomp":
                raise ValueError(f"adapt_threshold needs codec 'adacomp', not {codec!r}")
            if not model_given:
                raise ValueError("adapt_threshold needs model= (every parameter known at the "
                                 "start)")
        self._scheduler = None  # the adaptive part (with the ramp), from build()
        self._norms = {}        # tensor id -> its averaged gradient's norm, this step

    @property
    def adaptive(self):
        return self.adapt["adapt_threshold"] > 0

    def build(self, entries, bin_sizes):
        """The adaptive part over ``entries`` (in tensor-id order), if it is on."""
        if not self.adaptive:
            return
        targets = [bin_sizes[e.layer_type]
                   if e.compressor is not None and e.compressor.codec == "adacomp" else 0
                   for e in entries]
        self._scheduler = _adacomp._BinScheduler(
            targets, self.ramp_steps, self.ramp_start, self.ramp_stages, **self.adapt)

    def is_dense(self, steps):
        """Whether step ``steps`` (counted from 0) goes uncompressed."""
        return steps < self.dense_warmup_steps

    def dense_compressor(self, e):
        """e's float32 compressor for the dense steps (no residue: nothing to undo)."""
        c = self._dense.get(e.tensor_id)
        if c is None:
            c = self._dense[e.tensor_id] = Compressor(e.numel, codec="dense",
                                                      tensor_id=e.tensor_id)
        return c

    def apply(self, e, steps, target):
        """Sets e's compressor to the bin size of step ``steps`` (``target``: its type's)."""
        if e.compressor.codec != "adacomp":
            return
        if self._scheduler is not None:
            size = self._scheduler.bin_size(e.tensor_id, steps)
        elif self.ramp_steps:
            size = _adacomp.ramp_bin_size(target, steps, self.ramp_steps, self.ramp_start,
                                          self.ramp_stages)
        else:
            return
        if size != e.compressor.bin_size:
            e.compressor.set_bin_size(size)

    def record_norms(self, work, layout):
        """Keeps the averaged gradients' norms of a settled bucket (adaptive part only)."""
        if self._scheduler is None:
            return
        arr = work.numpy()
        for e, off, n in layout:
            self._norms[e.tensor_id] = _adacomp._l2_norm(arr[off:off + n])

    def observe(self, steps, count):
        """The applied step's norms go to the adaptive part."""
        if self._scheduler is not None:
            self._scheduler.observe(steps, [self._norms.get(k, 0.0) for k in range(count)])

    def lr_dropped(self, steps):
        if self._scheduler is None:
            raise ValueError("lr_dropped() needs the adaptive schedule (adapt_threshold > 0)")
        self._scheduler.lr_dropped(steps)

    def save(self):
        return self._scheduler.save() if self._scheduler is not None else None

    def check(self, saved, count):
        """Raises ValueError unless ``saved`` (a save()) can be loaded; changes nothing."""
        if (saved is None) != (self._scheduler is None):
            raise ValueError("state_dict " + ("has no" if saved is None else "has an")
                             + " adaptive schedule, this state " +
                             ("has one" if saved is None else "has none"))
        if saved is not None:
            scratch = _adacomp._BinScheduler([0] * count, 0, 8, 4, **self.adapt)
            try:
                scratch.load(saved)
            except ValueError as exc:
                raise ValueError(f"state_dict's adaptive schedule: {exc}") from None

    def load(self, saved):
        if saved is not None:
            self._scheduler.load(saved)
