"""Network parts beyond the flat MLP: a head that scores each legal move, a history encoder, hand shape.

The strongest bots of this family do not read a flat observation into a fixed
softmax (:mod:`agents.nets.policy`).  DouZero scores each legal move from its
own features joined with the state and reads the move history with an LSTM;
PerfectDou gives its critic every seat's "fewest moves to play out".  Each part
here is one ``model.kind``, and ``combined`` has all three:

``moves``
    a logit per legal move from a small MLP over the state encoding joined with
    the move's features (:data:`STATIC_FEATURES`: kind, length, top rank, the
    cards it uses; and from the hand: the groups it breaks, the cards left after
    it, the fewest moves left after it and how that changes).  The 201-action
    index and the mask stay the interface; a per-action bias keeps the Sâm prior.
``history``
    attention over the observation's last 16 decisions (each a token of who,
    what kind, which ranks, at its place in time), beside the flat history
    block: a few heads whose queries come from the state, so that what is read
    depends on what the seat holds and faces.  A GRU read the same tokens
    3x slower on the CPU learner, for a part that is meant to be cheap.
``shape``
    the fewest moves that play the seat's own hand out (:mod:`sam_env.hand_moves`,
    a DP table looked up with one gather), in the state encoding; and, in the
    critic, every seat's.

Everything is computed from the observation the engine already writes (the
hand's thermometer, the history tokens, the ``ace_low_straights`` cell), so the
rollout format, search and serving are unchanged and the served forward exports
to ONNX like the MLP.  While acting and learning, moves are scored at the legal
(row, move) pairs alone, as :func:`agents.nets.sparse.masked_linear` does for
the MLP; an ONNX export (a traced graph) scores all 201 and masks them.  The
policy never reads the hidden hands: only ``train_forward``'s critic does.
"""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sam_env import hand_moves
from sam_env.actions import (ACT_COUNTS, ACT_KIND, ACT_LEN, ACT_RANK, ACT_RANK2, KIND_NAMES, NUM_ACTIONS,
                             NUM_POSITIONS, SAM)
from sam_env.cards import HAND_SIZE, MAX_PLAYERS, NUM_RANKS
from sam_env.obs_layout import F_HAND, F_HIST, HIST_ENTRY, SECTION, rule_offset

from .interface import MASK_LOGIT, HParam, PolicyNetwork
from .policy import SAM_PRIOR_LOGIT, Obs, _Critic
from .sparse import SparseRows, sparse_linear

HIST_LEN = SECTION["history"].shape[0]
ACE_LOW_CELL = rule_offset("ace_low_straights")
MOVES_ONE_HOT = HAND_SIZE + 1  # 0…10 moves or cards


def _static_features() -> np.ndarray:
    """``[201, F]`` what a move is, whatever the hand: kind (one-hot), length and cards / 10, top rank
    (one-hot of ``ACT_RANK``: a rank, or a straight's top position), second rank (double quads) and the
    rank counts it uses / 4."""
    kind = np.eye(len(KIND_NAMES))[ACT_KIND]
    top = np.eye(NUM_POSITIONS + 2)[ACT_RANK + 1]          # -1 (pass, Sâm) … 14
    second = np.eye(NUM_RANKS + 1)[ACT_RANK2 + 1]           # -1, or a double quad's higher rank
    length = (ACT_LEN / HAND_SIZE)[:, None]
    return np.concatenate([kind, top, second, length, ACT_COUNTS / 4.0], axis=1).astype(np.float32)


STATIC_FEATURES = _static_features()
DYNAMIC_FEATURES = 2 * MOVES_ONE_HOT + 2 + 3
"""Per move, from the hand: cards left (one-hot), fewest moves left (one-hot), their change / 3 and whether
it goes out, and the pairs, triples and quads it breaks."""


@lru_cache(maxsize=1)
def _lookup_tensors() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fewest-moves tables (``uint8 [2 * TABLE_SIZE]``: ace-low straights off, then on), the index terms
    flattened and the per-card-count offsets: built once per process, shared by every network."""
    table = np.concatenate([hand_moves.moves_table(False), hand_moves.moves_table(True)])
    return (torch.from_numpy(table.copy()), torch.from_numpy(hand_moves.INDEX_TERMS.reshape(-1).copy()),
            torch.from_numpy(hand_moves.COUNT_OFFSET.copy()))


class Hand(NamedTuple):
    """The seat's hand as the observation tells it: rank counts ``[B, 13]``, ``ace_low`` ``[B]`` and its
    fewest moves ``[B]``, read once per forward for the parts that use them."""

    counts: torch.Tensor
    ace_low: torch.Tensor
    moves: torch.Tensor

    def rows(self, index: torch.Tensor) -> "Hand":
        return Hand(self.counts[index], self.ace_low[index], self.moves[index])

    def per_move(self) -> "Hand":
        """Each row's hand against a move axis (``[B, 1, …]``): what an export scores all 201 moves with."""
        return Hand(self.counts.unsqueeze(1), self.ace_low.unsqueeze(1), self.moves.unsqueeze(1))


class PartsNet(PolicyNetwork):
    """The MLP trunk with the parts a subclass switches on (``moves``, ``history``, ``shape``)."""

    kind = ""
    takes_sparse_rows = True
    use_moves: ClassVar[bool] = False
    use_history: ClassVar[bool] = False
    use_shape: ClassVar[bool] = False

    def __init__(self, obs_size: int, num_actions: int = NUM_ACTIONS, hidden: int = 256, layers: int = 3,
                 critic_size: int = 0, move_width: int = 64, history_width: int = 32,
                 history_heads: int = 4):
        super().__init__()
        if num_actions != NUM_ACTIONS:
            raise ValueError(f"model kind {self.kind}: scores the engine's {NUM_ACTIONS} actions,"
                             f" not {num_actions}")
        self.obs_size, self.num_actions, self.hidden, self.layers = obs_size, num_actions, hidden, layers
        self.critic_size, self.move_width = critic_size, move_width
        self.history_width, self.history_heads = history_width, history_heads
        table, terms, offset = _lookup_tensors()
        self.register_buffer("moves_table", table, persistent=False)
        self.register_buffer("index_terms", terms, persistent=False)
        self.register_buffer("count_offset", offset, persistent=False)
        self.register_buffer("act_counts", torch.from_numpy(ACT_COUNTS.astype(np.int64)), persistent=False)
        self.inp = nn.Linear(obs_size, hidden)
        self.blocks = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers - 1))
        self.v = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.v.weight, 1.0)
        nn.init.zeros_(self.v.bias)
        if self.use_history:
            self.tokens = nn.Linear(HIST_ENTRY, history_width)
            self.when = nn.Parameter(0.1 * torch.randn(HIST_LEN, history_width))  # a token's place in time
            self.queries = nn.Linear(hidden, history_heads * history_width)
            self.hist_in = nn.Linear(history_heads * history_width, hidden, bias=False)
        if self.use_shape:
            self.shape_in = nn.Linear(MOVES_ONE_HOT, hidden, bias=False)
        if self.use_moves:
            self.register_buffer("static", torch.from_numpy(STATIC_FEATURES), persistent=False)
            self.m_state = nn.Linear(hidden, move_width)
            self.m_what = nn.Linear(STATIC_FEATURES.shape[1], move_width, bias=False)  # what the move is
            self.m_hand = nn.Linear(DYNAMIC_FEATURES, move_width, bias=False)  # what it does to the hand
            self.m_mid = nn.Linear(move_width, move_width)
            self.m_out = nn.Linear(move_width, 1)
            self.act_bias = nn.Parameter(torch.zeros(num_actions))
            nn.init.orthogonal_(self.m_out.weight, 0.01)
            nn.init.zeros_(self.m_out.bias)
            with torch.no_grad():
                self.act_bias[SAM] = SAM_PRIOR_LOGIT
        else:
            self.pi = nn.Linear(hidden, num_actions)
            nn.init.orthogonal_(self.pi.weight, 0.01)
            nn.init.zeros_(self.pi.bias)
            with torch.no_grad():
                self.pi.bias[SAM] = SAM_PRIOR_LOGIT
        seats = MAX_PLAYERS * MOVES_ONE_HOT if self.use_shape else 0
        self.critic = _Critic(hidden + critic_size + seats, hidden) if critic_size > 0 else None

    @property
    def has_critic(self) -> bool:
        return self.critic is not None

    def arguments(self) -> dict[str, HParam]:
        args: dict[str, HParam] = {"obs_size": self.obs_size, "num_actions": self.num_actions,
                                   "hidden": self.hidden, "layers": self.layers,
                                   "critic_size": self.critic_size}
        if self.use_moves:
            args["move_width"] = self.move_width
        if self.use_history:
            args["history_width"], args["history_heads"] = self.history_width, self.history_heads
        return args

    # ---- the state ---------------------------------------------------------------------------------
    def fewest_moves(self, counts: torch.Tensor, ace_low: torch.Tensor) -> torch.Tensor:
        """The fewest moves that play out hands of rank counts ``counts`` (``[..., 13]``, whole numbers as
        floats or ints), under ``ace_low`` (bool, broadcast to ``counts[..., 0]``): int64 ``[...]``.  A
        "hand" of more than 10 cards (no real observation has one) reads as 0."""
        c = counts.long().clamp(0, 4)
        s = c.cumsum(-1)
        total = s[..., -1]
        valid = total <= hand_moves.MAX_CARDS
        s = s.clamp(max=hand_moves.MAX_CARDS)
        ranks = torch.arange(NUM_RANKS, device=c.device) * (hand_moves.MAX_CARDS + 1) * 5
        at = self.index_terms[ranks + s * 5 + c].sum(-1) + self.count_offset[s[..., -1]]
        at = torch.where(valid, at, torch.zeros_like(at))
        return self.moves_table[ace_low.long() * hand_moves.TABLE_SIZE + at].long()  # broadcast

    def _hand(self, dense: torch.Tensor) -> Hand:
        """The seat's :class:`Hand`, from the hand's thermometer and the ``ace_low_straights`` cell."""
        counts = dense[:, F_HAND:F_HAND + NUM_RANKS * 4].float().reshape(-1, NUM_RANKS, 4).sum(-1).round()
        ace_low = dense[:, ACE_LOW_CELL] > 0.5
        return Hand(counts, ace_low, self.fewest_moves(counts, ace_low))

    def encode(self, obs: Obs) -> tuple[torch.Tensor, Hand]:
        """The state encoding ``h`` ``[B, hidden]`` and the seat's :class:`Hand`."""
        dense = obs if torch.is_tensor(obs) else obs.dense()
        hand = self._hand(dense)
        if torch.is_tensor(obs):
            x = self.inp(obs)
        else:
            x = sparse_linear(obs, self.inp.weight, self.inp.bias)
        if self.use_history:
            x = x + self._history(dense, x)
        if self.use_shape:
            own = F.one_hot(hand.moves, MOVES_ONE_HOT)
            x = x + self.shape_in(own.to(self.shape_in.weight.dtype)).to(x.dtype)
        h = torch.relu(x)
        for blk in self.blocks:
            h = h + torch.relu(blk(h))
        return h, hand

    def _history(self, dense: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """What the heads read in the last 16 decisions (absent ones, before the game's start, masked),
        queried by the state's first layer ``x``: ``[B, hidden]``, to add to ``x``."""
        tokens = dense[:, F_HIST:F_HIST + HIST_LEN * HIST_ENTRY].reshape(-1, HIST_LEN, HIST_ENTRY)
        keys = torch.relu(self.tokens(tokens.to(self.tokens.weight.dtype)) + self.when)   # [B, T, W]
        queries = self.queries(torch.relu(x)).reshape(-1, self.history_heads, self.history_width)
        scores = torch.matmul(queries, keys.transpose(1, 2)).float() / self.history_width ** 0.5  # [B, H, T]
        present = tokens[:, None, :, 0] > 0.5
        weights = torch.softmax(torch.where(present, scores, torch.full_like(scores, MASK_LOGIT)), -1)
        read = torch.matmul(weights.to(keys.dtype), keys).flatten(1)            # [B, H * W]
        return self.hist_in(read).to(x.dtype)

    # ---- the moves ---------------------------------------------------------------------------------
    def move_features(self, hand: Hand, acts: torch.Tensor) -> torch.Tensor:
        """``[..., DYNAMIC_FEATURES]``: what moves ``acts`` do to ``hand`` (its tensors broadcast with
        ``acts``); what each move is, whatever the hand, is ``STATIC_FEATURES[acts]``."""
        used = self.act_counts[acts]
        held = hand.counts.long().clamp(0, 4)
        rest = (held - used).clamp(min=0)
        left = rest.sum(-1).clamp(max=HAND_SIZE)
        before, after = hand.moves, self.fewest_moves(rest, hand.ace_low)
        broken = (used > 0) & (held > used)
        breaks = torch.stack([(broken & (held == k)).sum(-1) for k in (2, 3, 4)], -1)
        dtype = self.static.dtype
        change, out = (after - before).to(dtype) / 3.0, (left == 0).to(dtype)
        return torch.cat([F.one_hot(left, MOVES_ONE_HOT).to(dtype), F.one_hot(after, MOVES_ONE_HOT).to(dtype),
                          change.unsqueeze(-1), out.unsqueeze(-1), breaks.to(dtype) / 2.0], -1)

    def _scores(self, h: torch.Tensor, feats: torch.Tensor, acts: torch.Tensor) -> torch.Tensor:
        """The logit of each (state, move) pair: ``h``, ``feats`` (:meth:`move_features`) and ``acts``
        broadcast together; the first layer's three parts are summed, a concatenation's product."""
        what = self.m_what(self.static[acts].to(self.m_what.weight.dtype))
        z = torch.relu(self.m_state(h) + what + self.m_hand(feats.to(self.m_hand.weight.dtype)))
        z = torch.relu(self.m_mid(z))
        return self.m_out(z).squeeze(-1).float() + self.act_bias[acts].float()

    def _move_logits(self, h: torch.Tensor, hand: Hand, mask: torch.Tensor) -> torch.Tensor:
        legal = mask > 0
        if torch.jit.is_tracing():  # an export: every move scored, then masked (a graph of fixed shapes)
            acts = torch.arange(self.num_actions, device=h.device)
            scores = self._scores(h.unsqueeze(1), self.move_features(hand.per_move(), acts), acts)
            return torch.where(legal, scores, torch.full_like(scores, MASK_LOGIT))
        rows, acts = legal.nonzero(as_tuple=True)
        scores = self._scores(h[rows], self.move_features(hand.rows(rows), acts), acts)
        out = torch.full(mask.shape, MASK_LOGIT, dtype=scores.dtype, device=h.device)
        return out.index_put((rows, acts), scores)

    # ---- the interface -----------------------------------------------------------------------------
    def _heads(self, h: torch.Tensor, hand: Hand, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.use_moves:
            masked = self._move_logits(h, hand, mask)
        else:
            logits = self.pi(h)
            masked = torch.where(mask > 0, logits, torch.full_like(logits, MASK_LOGIT))
        return masked, self.v(h).squeeze(-1)

    def forward(self, obs: Obs, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, hand = self.encode(obs)
        return self._heads(h, hand, mask)

    def policy_logits(self, obs: torch.Tensor, legal: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of the ``legal`` moves, or without them of every move the hand can make (the rest
        :data:`MASK_LOGIT`): a search's rollout step masks them with the legal moves, all of which the hand
        can make.  Scoring the legal moves alone is what makes the move head cheap in a rollout: a hand
        can make several times more moves than are legal when it follows."""
        if not self.use_moves:
            return self.pi(self.encode(obs)[0])
        h, hand = self.encode(obs)
        if legal is None:
            legal = (self.act_counts.unsqueeze(0) <= hand.counts.long().unsqueeze(1)).all(-1)
        return self._move_logits(h, hand, legal)

    def train_forward(self, obs: Obs, mask: torch.Tensor, hidden_hands: torch.Tensor | SparseRows
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h, hand = self.encode(obs)
        masked, value = self._heads(h, hand, mask)
        if self.critic is None:
            return masked, value, value
        return masked, value, self._critic(h, hand.ace_low, hidden_hands)

    def leaf_value(self, obs: torch.Tensor, hidden_hands: torch.Tensor, critic_weight: float) -> torch.Tensor:
        """As the interface's, without the policy head."""
        h, hand = self.encode(obs)
        value = self.v(h).squeeze(-1)
        if critic_weight == 0.0:
            return value
        if self.critic is None:
            raise ValueError("this network has no critic (trained without model.critic: full)")
        critic = self._critic(h, hand.ace_low, hidden_hands)
        return critic if critic_weight == 1.0 else critic_weight * critic + (1.0 - critic_weight) * value

    def _critic(self, h: torch.Tensor, ace_low: torch.Tensor, hidden_hands: torch.Tensor | SparseRows
                ) -> torch.Tensor:
        """The critic's value from ``h``, every hand and (``shape``) every seat's fewest moves; hands given
        as nonzero cells go through the first layer's columns sparse, as the MLP's critic does."""
        sparse = isinstance(hidden_hands, SparseRows)
        hands = hidden_hands.dense() if sparse else hidden_hands
        dense_parts = [h] if sparse else [h, hands.to(h.dtype)]
        if self.use_shape:  # every seat's fewest moves (an empty seat's 0)
            counts = hands.float().reshape(-1, MAX_PLAYERS, NUM_RANKS, 4).sum(-1).round()
            seats = self.fewest_moves(counts, ace_low.unsqueeze(1))
            dense_parts.append(F.one_hot(seats, MOVES_ONE_HOT).flatten(1).to(h.dtype))
        if not sparse:
            return self.critic(torch.cat(dense_parts, -1))
        w, n = self.critic.inp.weight, h.shape[1]
        x = F.linear(torch.cat(dense_parts, -1), torch.cat([w[:, :n], w[:, n + self.critic_size:]], 1),
                     self.critic.inp.bias)
        return self.critic.rest(x + sparse_linear(hidden_hands, w[:, n:n + self.critic_size]))


class MovesNet(PartsNet):
    """``model.kind: moves``: the MLP trunk, each legal move scored from its features."""

    kind = "moves"
    use_moves = True


class HistoryNet(PartsNet):
    """``model.kind: history``: the MLP and its 201-way head, with attention over the last 16 decisions."""

    kind = "history"
    use_history = True


class ShapeNet(PartsNet):
    """``model.kind: shape``: the MLP and its 201-way head, with the hand's fewest moves (and, in the
    critic, every seat's)."""

    kind = "shape"
    use_shape = True


class CombinedNet(PartsNet):
    """``model.kind: combined``: the move-scoring head, the history attention and the hand shape together."""

    kind = "combined"
    use_moves = use_history = use_shape = True


PART_NETWORKS: tuple[type[PartsNet], ...] = (MovesNet, HistoryNet, ShapeNet, CombinedNet)
