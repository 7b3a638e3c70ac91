"""What a rollout worker ships per learner decision, packed, and its expansion on the learner's device.

A float32 observation is 993 x 4 bytes, yet almost all its cells are 0 or 1
and the rest are small integers over a fixed denominator.  From the layout
table of ``sam_env.obs_layout`` (each section's cell kinds), today:

==========  =====  =============================================  ===========================
cells       count  what                                           shipped as
==========  =====  =============================================  ===========================
0/1           756  thermometers, one-hots, flags                  one bit each, in place
quarters      221  rank counts / 4 (top_cards, history cards)     3 bits: the lowest in place
amounts        14  lá / 20 clipped to ±10 (chain value, scores,   int16 of lá
                   the rules' amounts)
progress        1  decisions / 100                                uint8 numerator
fifths          1  max_players / 5                                uint8 numerator
==========  =====  =============================================  ===========================

"In place" means one bit per observation cell in the cells' own order, so
the learner expands the whole vector with one unpacking and then writes the
237 other cells; their values come from float32 tables made with the
encoder's own arithmetic (a float64 quotient rounded to float32), so what the
learner learns from is, bit for bit, what the worker encoded
(``tests/test_compact.py`` checks it over random states of every preset).
The mask and the hidden hands (0/1) go as bits, the action as uint8: 289
bytes per decision with the full critic, instead of 4,459 as float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from agents.nets.sparse import SparseRows
from sam_env.actions import NUM_ACTIONS
from sam_env.obs import FULL_EXTRA, OBS_SIZE, OBS_VERSION
from sam_env.obs_layout import QUARTER, cell_kinds

#: The observation layout described here; another one must be described again.
PACKED_OBS_VERSION = 1
# besides the obs_* arrays; every other array is a per-row figure, shipped as is
_PACKED = ("mask", "hid", "act")


@dataclass(frozen=True)
class Coded:
    """Observation cells whose value is ``code / denom`` for an integer code from ``lo`` to ``hi``."""

    name: str
    cols: np.ndarray
    denom: int
    lo: int
    hi: int
    dtype: type

    def table(self) -> np.ndarray:
        """Every value a code stands for, computed as the encoder computes it."""
        return (np.arange(self.lo, self.hi + 1, dtype=np.float64) / self.denom).astype(np.float32)


@dataclass(frozen=True)
class Layout:
    """Which observation cells are not plain bits, from the kinds of ``sam_env.obs_layout.SECTIONS``."""

    quarters: np.ndarray          # rank counts / 4: codes 0..4
    coded: tuple[Coded, ...]      # shipped as integers
    other: np.ndarray             # every cell whose in-place bit is not its value


@lru_cache(maxsize=1)
def layout() -> Layout:
    if OBS_VERSION != PACKED_OBS_VERSION:
        raise RuntimeError(f"training/run/compact.py describes observation version {PACKED_OBS_VERSION}, "
                           f"sam_env.obs is at {OBS_VERSION}: describe its cells again")
    kinds = cell_kinds()
    quarters = [i for i, k in enumerate(kinds) if k == QUARTER]
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(kinds):
        if not k.binary and k != QUARTER:
            groups.setdefault(k.name, []).append(i)
    coded = tuple(_coded(name, cols, [kinds[i] for i in cols]) for name, cols in groups.items())
    other = np.sort(np.concatenate([quarters, *(c.cols for c in coded)]))
    return Layout(np.array(quarters), coded, other)


def _coded(name: str, cols: list[int], kinds: list) -> Coded:
    """One group of cells over one denominator, shipped as the smallest integer type of its codes."""
    denoms = {k.denom for k in kinds}
    assert len(denoms) == 1, f"cells of {name} have different denominators {denoms}"
    lo, hi = min(k.lo for k in kinds), max(k.hi for k in kinds)
    dtype = np.uint8 if 0 <= lo and hi <= 255 else np.int16
    assert np.iinfo(dtype).min <= lo and hi <= np.iinfo(dtype).max
    return Coded(name, np.array(cols), denoms.pop(), lo, hi, dtype)


# ---- on the worker: numpy ------------------------------------------------------------------
def pack(obs: np.ndarray, mask: np.ndarray, hid: np.ndarray, act: np.ndarray,
         plain: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The learner decisions a worker ships: ``obs`` float32 ``[n, OBS_SIZE]``, ``mask`` ``[n, NUM_ACTIONS]``
    and ``hid`` ``[n, FULL_EXTRA or 0]`` (0/1), ``act`` ``[n]``, and ``plain``, the algorithm's per-row
    figures (PPO's logp, val, adv, ret, teach; DMC's ret), as they are."""
    out = pack_obs(obs, mask)
    out["hid"] = np.packbits(hid != 0, axis=-1)
    out["act"] = act.astype(np.uint8)
    out.update(plain)
    return out


def pack_obs(obs: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Observations and legal masks alone, packed (the ``obs_*`` and ``mask`` arrays of :func:`pack`;
    the search's targets travel this way too, training/algorithms/expert_search.py)."""
    lay = layout()
    bits = obs != 0
    q = np.rint(np.take(obs, lay.quarters, axis=1) * 4).astype(np.uint8)
    bits[:, lay.other] = False
    bits[:, lay.quarters] = (q & 1).astype(bool)
    out = {"obs_bits": np.packbits(bits, axis=-1),
           "obs_quarters": np.packbits(np.stack([(q >> 1) & 1, (q >> 2) & 1], axis=1), axis=-1)}
    for c in lay.coded:
        out[f"obs_{c.name}"] = np.rint(np.take(obs, c.cols, axis=1) * c.denom).astype(c.dtype)
    out["mask"] = np.packbits(mask != 0, axis=-1)
    return out


def nbytes(packed: dict[str, np.ndarray]) -> int:
    return sum(v.nbytes for v in packed.values())


def concat(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Packed batches as one (what one update learns from)."""
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


# ---- on the learner: torch, on its device ----------------------------------------------------
def to_device(packed: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """The packed arrays on ``device``: through pinned memory with asynchronous copies on CUDA."""
    out = {}
    for k, v in packed.items():
        # Ray's are read-only
        t = torch.from_numpy(np.ascontiguousarray(v) if v.flags.writeable else np.array(v))
        if device.type == "cuda":
            t = t.pin_memory().to(device, non_blocking=True)
        out[k] = t
    return out


def _unpack_bits(x: torch.Tensor, count: int) -> torch.Tensor:
    """``np.unpackbits`` along the last axis (most significant bit first), cut to ``count``."""
    shifts = torch.arange(7, -1, -1, dtype=torch.uint8, device=x.device)
    return ((x.unsqueeze(-1) >> shifts) & 1).flatten(-2)[..., :count]


@lru_cache(maxsize=8)
def _on(device: torch.device) -> tuple[torch.Tensor, tuple[tuple[torch.Tensor, torch.Tensor], ...]]:
    """The layout's index arrays and value tables on ``device``."""
    lay = layout()
    return (torch.from_numpy(lay.quarters).to(device),
            tuple((torch.from_numpy(c.cols).to(device), torch.from_numpy(c.table()).to(device))
                  for c in lay.coded))


def expand(packed: dict[str, torch.Tensor], sparse: bool = False) -> dict[str, torch.Tensor | SparseRows]:
    """The training batch from packed tensors, on their device: obs float32, mask int8, hid uint8,
    act int64, and the per-row figures as shipped.  ``sparse`` (CPU tensors only): obs and hid as
    :class:`agents.nets.sparse.SparseRows`, their nonzero cells, for a network that takes them."""
    hid_size = FULL_EXTRA if packed["hid"].shape[1] else 0  # no critic: no hands
    if sparse:
        obs, mask = expand_obs_sparse(packed)
        hid = SparseRows.from_bits(packed["hid"].numpy(), np.packbits(np.ones(hid_size, bool)), hid_size)
    else:
        obs, mask = expand_obs(packed)
        hid = _unpack_bits(packed["hid"], hid_size).to(torch.uint8)
    out = {"obs": obs, "mask": mask, "hid": hid, "act": packed["act"].to(torch.int64)}
    out.update({k: v for k, v in packed.items() if k not in _PACKED and not k.startswith("obs_")})
    return out


def expand_obs(packed: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 observations and int8 masks of :func:`pack_obs`'s arrays, on their device."""
    device = packed["mask"].device
    quarters, coded = _on(device)
    bits = _unpack_bits(packed["obs_bits"], OBS_SIZE)
    high = _unpack_bits(packed["obs_quarters"], len(quarters))
    counts = bits.index_select(1, quarters) | (high[:, 0] << 1) | (high[:, 1] << 2)
    obs = bits.to(torch.float32)
    obs.index_copy_(1, quarters, counts.to(torch.float32) * 0.25)  # exact: small integers times 2**-2
    for c, (cols, table) in zip(layout().coded, coded):
        obs.index_copy_(1, cols, table[packed[f"obs_{c.name}"].to(torch.int64) - c.lo])
    return obs, _unpack_bits(packed["mask"], NUM_ACTIONS).to(torch.int8)


@lru_cache(maxsize=1)
def _sparse_tables() -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """For :func:`expand_obs_sparse`: the bits that are cells worth 1 (packed), and where the quarters and
    each coded group sit among ``layout().other``."""
    lay = layout()
    binary = np.ones(OBS_SIZE, bool)
    binary[lay.other] = False
    return np.packbits(binary), tuple(np.searchsorted(lay.other, c)
                                      for c in (lay.quarters, *(c.cols for c in lay.coded)))


def expand_obs_sparse(packed: dict[str, torch.Tensor]) -> tuple[SparseRows, torch.Tensor]:
    """:func:`expand_obs` on the CPU as the observations' nonzero cells, without the dense matrix: the 0/1
    cells straight from the bits, the other cells' values computed as :func:`expand_obs` computes them."""
    lay = layout()
    keep, (qplace, *cplace) = _sparse_tables()
    bits = packed["obs_bits"].numpy()
    q = np.unpackbits(bits, axis=1)[:, lay.quarters]
    high = np.unpackbits(packed["obs_quarters"].numpy(), axis=-1, count=len(q[0]))
    other = np.empty((len(bits), len(lay.other)), np.float32)
    other[:, qplace] = ((q | (high[:, 0] << 1) | (high[:, 1] << 2)).astype(np.float32)
                        * np.float32(0.25))  # exact
    for c, place in zip(lay.coded, cplace):
        other[:, place] = c.table()[packed[f"obs_{c.name}"].numpy().astype(np.int64) - c.lo]
    rows = SparseRows.from_bits(bits, keep, OBS_SIZE, lay.other, other)
    return rows, _unpack_bits(packed["mask"], NUM_ACTIONS).to(torch.int8)
