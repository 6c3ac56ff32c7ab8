"""The hook's checkpoints: a rank's state (residues and generator states by
parameter name, the schedule, the local optimizer, step counters and totals)
marked with its rank and world size, every rank's state gathered into one
object that any rank loads its own part from, and a load that checks every
entry before it changes anything."""

import torch.distributed as dist

from .. import Compressor
from .layers import LAYER_TYPES
from .stats import _Counters

FORMAT = "adacomp.torch.AdaCompState/1"
GATHERED_FORMAT = "adacomp.torch.AdaCompState/gathered/1"


def _save(st):
    """AdaCompState.state_dict()."""
    with st._lock:
        params = {}
        for name, e in st._by_name.items():
            if e.compressor is None:
                continue
            d = e.compressor.state_dict()
            d["layer_type"] = e.layer_type
            params[name] = d
        params.update({n: s for n, s in st._pending.items() if n not in params})
        return {
            "format": FORMAT,
            "rank": st._rank(),
            "world_size": st._world(),
            "codec": st.codec,
            "params": params,
            "steps": st.steps,
            "buckets": st.buckets,
            "transport_bytes": st.transport_bytes,
            "totals": {t: c.as_dict() for t, c in st._totals.items()},
            "schedule": st._schedule.save(),
            **({"local_optimizer": st._local.save()} if st._local is not None else {}),
            **({"auto": st._auto.save()} if st._auto is not None else {}),
        }


def _gather(st, dst=0):
    """AdaCompState.gathered_state_dict()."""
    mine = _save(st)
    world = mine["world_size"]
    if world == 1:
        return {"format": GATHERED_FORMAT, "world_size": 1, "ranks": [mine]}
    parts = [None] * world if mine["rank"] == dst else None
    dist.gather_object(mine, parts, dst=dist.get_global_rank(st.process_group, dst)
                       if st.process_group is not None else dst,
                       group=st.process_group)
    if parts is None:
        return None
    return {"format": GATHERED_FORMAT, "world_size": world, "ranks": parts}


def _load(st, state):
    """AdaCompState.load_state_dict()."""
    if not isinstance(state, dict):
        raise ValueError(f"not an AdaCompState state_dict ({type(state).__name__})")
    rank, world = st._rank(), st._world()
    if state.get("format") == GATHERED_FORMAT:
        if state.get("world_size") != world or len(state.get("ranks", ())) != world:
            raise ValueError(f"the gathered state_dict is from a world of "
                             f"{state.get('world_size')} ranks, this one has {world}; "
                             f"residues do not carry over to another world size")
        state = state["ranks"][rank]
    if "rank" in state and (state["rank"] != rank or state["world_size"] != world):
        raise ValueError(
            f"this state_dict is rank {state['rank']}'s of {state['world_size']}, loaded "
            f"on rank {rank} of {world}: each rank's residues are its own. Save every "
            f"rank's own state_dict(), or gathered_state_dict() on one rank (which every "
            f"rank can load)")
    if state.get("format") != FORMAT:
        raise ValueError(f"not an AdaCompState state_dict (format {state.get('format')!r})")
    with st._lock:
        params = state["params"]
        for name, d in params.items():
            e = st._by_name.get(name)
            if e is None:
                if st._model_given:
                    raise ValueError(f"state_dict has a residue for parameter {name!r}, which "
                                     f"the model does not have")
                continue
            if e.compressor is None or d.get("elements") != e.numel:
                raise ValueError(f"state_dict entry {name!r} has {d.get('elements')} elements, "
                                 f"the parameter has {e.numel}")
            if d.get("codec") != e.compressor.codec:
                raise ValueError(f"state_dict entry {name!r} is for codec {d.get('codec')!r}, "
                                 f"this state uses {e.compressor.codec!r}")
        sched = state.get("schedule")
        st._schedule.check(sched, len(st._by_name))
        local = state.get("local_optimizer")
        if st._local is not None:
            st._local.check(local, {n: e.numel for n, e in st._by_name.items()})
        elif local is not None:
            raise ValueError("state_dict has a local optimizer, this state has none")
        if st._auto is not None:
            st._auto.check(state.get("auto"))
        elif "auto" in state:
            raise ValueError("state_dict has an auto state, this state has auto=False")
        # Validate the state bytes on scratch compressors so a failure changes nothing.
        for name, d in params.items():
            e = st._by_name.get(name)
            if e is not None:
                scratch = Compressor(e.numel, codec=e.compressor.codec,
                                     bin_size=e.compressor.bin_size,
                                     values=e.compressor.values, density=st.density,
                                     tau=st.tau, tensor_id=e.tensor_id)
                scratch.load_state_dict(d)
        for name, d in params.items():
            e = st._by_name.get(name)
            if e is None:
                st._pending[name] = d
            else:
                e.compressor.load_state_dict(d)
        st._schedule.load(sched)
        if st._local is not None:
            st._local.load(local)
        if st._auto is not None:
            st._auto.load(state["auto"])
        st._open = None  # a step in progress is superseded by the loaded state
        st.steps = int(state.get("steps", 0))
        st.buckets = int(state.get("buckets", 0))
        st.transport_bytes = int(state.get("transport_bytes", 0))
        totals = state.get("totals", {})
        st._totals = {t: _Counters.from_dict(totals.get(t, {})) for t in LAYER_TYPES}
