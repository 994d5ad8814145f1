"""The graphs of the graph loss (Zhao et al., Sec. 2.1), as arrays the forward-backward reads.

* the **numerator** ``S^trn = T o W`` of eq. (4) for each utterance: the token graph ``T`` of a
  topology (:mod:`speechlab.asr.ctc.topology`) composed with the linear acceptor ``W`` of its
  phone sequence (the lexicon ``L`` is the identity here: targets are phones);
* the **denominator** graph ``T`` of eq. (5), shared by every utterance.

Both are built directly as arrays (no FST composition at training time); the tests check them
against ``kaldifst.compose`` and against ``topology.arcs``.

The form, :class:`GraphBatch`, is chosen for the kernel in :mod:`._graph_numba`.  In ``T``
every arc that enters a state consumes one frame scored by *that state's* token (topology.py),
so scores sit on **nodes**, not arcs: ``alpha_t(n) = log_probs[t-1, column(n)] + logsumexp``
over the arcs into ``n`` of ``alpha_{t-1}(src)``.  A graph is therefore stored as incoming
adjacency lists (CSR by destination) plus one column per node; parallel arcs appear twice.

``T``'s denominator has P^2 arcs (every phone's exit state reaches every phone's first state).
It is stored factored through one **epsilon node** ``G`` -- "between two phones" -- that sums
the hub and every exit state within the frame and feeds the hub and every first state; that is
P arcs in and P out, exactly the same paths.  Under CTC's rule (S1-T1) the arc ``p0 -> p0``
that starts a second ``p`` is missing, but there the self-loop ``p0 -> p0`` with the same token
takes its place, so ``G -> p0`` alone stands for both (checked in :func:`denominator`).

Shape legend: B batch, U target length, P phones, x states per phone, S nodes (states), A arcs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from speechlab.asr.ctc._graph_numba import build_numerators
from speechlab.asr.ctc.topology import Arcs, Topology, get

EPSILON = -1  #: the column of an epsilon node: entering it consumes no frame


@dataclass(frozen=True)
class GraphBatch:
    """B graphs in one set of arrays (node ids are global; a graph may be shared by many b).

    Utterance b's graph has nodes ``lo[b] .. hi[b]-1``: emitting nodes ``lo[b] .. eps[b]-1``,
    then epsilon nodes ``eps[b] .. hi[b]-1``.  Entering an emitting node ``n`` at frame t
    scores ``log_probs[b, t, column[n]]``; an epsilon node sums its sources within the frame,
    and its sources are emitting nodes only.

    Attributes:
        column: (S,) int64 log_probs column of each node, :data:`EPSILON` for epsilon nodes.
        in_ptr: (S+1,) int64; the arcs into node n come from ``in_src[in_ptr[n]:in_ptr[n+1]]``.
        in_src: (A,) int64 source node of each arc.
        out_ptr, out_dst: (S+1,), (A,) int64, the same arcs listed by source (the backward
            pass reads them).
        final: (S,) bool.
        start: (B,) int64 start node of each utterance (an emitting node, entered by no frame).
        lo, eps, hi: (B,) int64 node ranges as above.
    """

    column: np.ndarray
    in_ptr: np.ndarray
    in_src: np.ndarray
    out_ptr: np.ndarray
    out_dst: np.ndarray
    final: np.ndarray
    start: np.ndarray
    lo: np.ndarray
    eps: np.ndarray
    hi: np.ndarray

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The fields in the order the kernel (:mod:`._graph_numba`) takes them."""
        return (self.column, self.in_ptr, self.in_src, self.out_ptr, self.out_dst, self.final,
                self.start, self.lo, self.eps, self.hi)

    def select(self, b: int) -> "GraphBatch":
        """Utterance b's graph alone, renumbered from 0 (for tests and debugging)."""
        lo, hi = int(self.lo[b]), int(self.hi[b])
        ptr = self.in_ptr[lo:hi + 1]
        out = self.out_ptr[lo:hi + 1]
        return GraphBatch(
            column=self.column[lo:hi].copy(),
            in_ptr=ptr - ptr[0],
            in_src=self.in_src[ptr[0]:ptr[-1]] - lo,
            out_ptr=out - out[0],
            out_dst=self.out_dst[out[0]:out[-1]] - lo,
            final=self.final[lo:hi].copy(),
            start=np.array([self.start[b] - lo]),
            lo=np.array([0]),
            eps=np.array([self.eps[b] - lo]),
            hi=np.array([hi - lo]),
        )


def _by_source(in_ptr: np.ndarray, in_src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Incoming lists (CSR by destination) -> outgoing lists (CSR by source)."""
    size = len(in_ptr) - 1
    dst = np.repeat(np.arange(size, dtype=np.int64), np.diff(in_ptr))
    order = np.argsort(in_src, kind="stable")  # nearly sorted already: cheap
    out_ptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(in_src, minlength=size), out=out_ptr[1:])
    return out_ptr, dst[order]


def columns(topo: Topology, num_phones: int, blank: int = 0) -> np.ndarray:
    """(1 + P*x,) int64: the log_probs column of each token of the layout (topology.py).

    With ``blank == 0`` this is the identity.  Another blank id moves the blank to that column
    and keeps the phone tokens in order around it -- what ``torch.nn.functional.ctc_loss``
    does with its ``blank`` for S1-T1 (phone p is then column ``p - 1`` if ``p <= blank``).
    """
    n = 1 + num_phones * topo.states
    cols = np.empty(n, dtype=np.int64)
    cols[0] = blank
    phone_tokens = np.arange(n - 1)
    cols[1:] = phone_tokens + (phone_tokens >= blank)
    return cols


# --------------------------------------------------------------------------------------------
# Numerator: T o W (eq. 4), one chain of phone blocks per utterance


#: When an arc of the numerator template exists (:func:`_numerator_template`).
ALWAYS, AFTER, NEW = 0, 1, 2


def _numerator_template(topo: Topology) -> list[tuple[int, list[tuple[int, int]]]]:
    """Arcs into each node of one phone block, as (slot, [(source offset, condition)]).

    Utterance nodes come in blocks of x + 1: block k (k = 0..U-1) holds ``hub_k`` ("k phones
    done, in the blank or at the start") at slot 0 and phone k+1's states 0..x-1 at slots
    1..x; block U holds ``hub_U`` alone.  Offsets are relative to the destination node, so the
    template is the same for every block.  Conditions: :data:`ALWAYS`; :data:`AFTER`: only
    when a phone precedes the block (k >= 1); :data:`NEW`: also not a CTC-rule repeat
    (``y_{k+1} == y_k`` under S1-T1).
    """
    x = topo.states
    back = x + 1  # from a slot of block k to the same slot of block k-1
    exits = topo.exit_states
    into_hub = [(0, ALWAYS)] + [(-back + 1 + s, AFTER) for s in exits]
    into: list[list[tuple[int, int]]] = [[] for _ in range(x)]
    into[0] = [(-1, ALWAYS)]  # hub_k starts phone k+1
    into[0] += [(-back + 1 + s - 1, NEW) for s in exits]  # phone k ends, phone k+1 starts
    for a, b in topo.within():
        into[b].append((a - b, ALWAYS))
    return [(0, into_hub)] + [(1 + s, arcs) for s, arcs in enumerate(into)]


@cache
def _template_arrays(topology: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_numerator_template` as arrays for :func:`._graph_numba.build_numerators`:
    ``ptr`` (x+2,), ``offset`` and ``condition`` (K,) int64, the arcs into slot s at
    ``ptr[s]:ptr[s+1]``.  Cached per topology (eight entries at most); read-only."""
    template = _numerator_template(get(topology))
    ptr = np.cumsum([0] + [len(arcs) for _, arcs in template]).astype(np.int64)
    offset = np.array([o for _, arcs in template for o, _ in arcs], dtype=np.int64)
    condition = np.array([c for _, arcs in template for _, c in arcs], dtype=np.int64)
    for a in (ptr, offset, condition):
        a.flags.writeable = False
    return ptr, offset, condition


def numerator(
    topology: str, phones: np.ndarray, lengths: np.ndarray, num_phones: int, blank: int = 0
) -> GraphBatch:
    """The numerator graphs ``T o W(y_b)`` (eq. 4) of a batch, built in one kernel call.

    Args:
        topology: a topology name (``topology.TOPOLOGIES``).
        phones: (B, U) int phone ids 1..P; entries at or past ``lengths[b]`` are ignored.
        lengths: (B,) int U_b.
        num_phones: P (for the column map).
        blank: the blank's log_probs column (:func:`columns`).

    Utterance b has ``U_b (x + 1) + 1`` nodes: ``hub_0, (y_1, 0..x-1), hub_1, ..., hub_U``.
    Start ``hub_0``; final ``hub_U`` and the exit states of ``y_U``.  (Measured: 0.02 ms for
    8 x 40 phones, where the same construction in vectorised numpy took 0.1 ms.)
    """
    topo = get(topology)
    phones = np.ascontiguousarray(phones, dtype=np.int64).reshape(len(lengths), -1)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    column, in_ptr, in_src, out_ptr, out_dst, final, lo, hi = build_numerators(
        phones, lengths, columns(topo, num_phones, blank), topo.states, topo.ctc_rule,
        np.array(topo.exit_states, dtype=np.int64), *_template_arrays(topo.name))
    return GraphBatch(column, in_ptr, in_src, out_ptr, out_dst, final, lo.copy(), lo,
                      hi.copy(), hi)


def from_arcs(graphs: list[Arcs], topology: str, num_phones: int, blank: int = 0) -> GraphBatch:
    """Numerator graphs given as arc-labelled graphs (e.g. ``T o (L o W)`` of eq. 4 with a
    lexicon: :func:`speechlab.asr.ctc.graphs.to_arcs`), as one :class:`GraphBatch`.

    An arc consumes one frame scored by its token, so each arc becomes a node (its column the
    token's): graph b has a start node then one node per arc; node a is entered from the start
    node if arc a leaves the start state, and from every arc entering arc a's source state;
    it is final if arc a enters a final state (the start node too, if the start state is
    final). Paths and their scores are those of the arc graph; an empty graph (no state: no
    token sequence spells the transcript) gives a start node that is not final, so the
    utterance scores -inf (infeasible).

    Args:
        graphs: B graphs, tokens in the topology's layout (blank 0, phone p's state s at
            ``1 + (p-1) x + s``).
        topology, num_phones, blank: as for :func:`numerator` (the column map).
    """
    cols = columns(get(topology), num_phones, blank)
    column, dst_all, src_all, final_all = [], [], [], []
    lo = np.zeros(len(graphs), dtype=np.int64)
    offset = 0
    for b, g in enumerate(graphs):
        lo[b] = offset
        n_arcs = len(g.src)
        src = np.asarray(g.src, dtype=np.int64)
        dst = np.asarray(g.dst, dtype=np.int64)
        token = np.asarray(g.token, dtype=np.int64)
        final = np.asarray(g.final, dtype=bool)
        if n_arcs and (token.min() < 0 or token.max() >= len(cols)):
            raise ValueError(f"graph {b}: token ids must be 0..{len(cols) - 1}")
        column.append(np.concatenate([[cols[0]], cols[token]]) if n_arcs else np.array([cols[0]]))
        node = offset + 1 + np.arange(n_arcs)
        # arcs entering each state, grouped by state
        by_dst = np.argsort(dst, kind="stable")
        ptr = np.zeros(g.num_states + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=g.num_states), out=ptr[1:])
        count = ptr[src + 1] - ptr[src]  # arcs into arc a's source state
        rep = np.repeat(np.arange(n_arcs), count)
        within = np.arange(len(rep)) - np.repeat(np.cumsum(count) - count, count)
        pred = by_dst[ptr[src[rep]] + within]
        from_start = np.flatnonzero(src == g.start) if g.num_states else np.zeros(0, np.int64)
        dst_all += [node[from_start], node[rep]]
        src_all += [np.full(len(from_start), offset), node[pred]]
        is_final = np.zeros(1 + n_arcs, dtype=bool)
        if g.num_states:
            is_final[0] = bool(final[g.start])
            is_final[1:] = final[dst]
        final_all.append(is_final)
        offset += 1 + n_arcs
    hi = np.append(lo[1:], offset).astype(np.int64) if len(graphs) else lo.copy()
    dsts = np.concatenate(dst_all) if dst_all else np.zeros(0, np.int64)
    srcs = np.concatenate(src_all) if src_all else np.zeros(0, np.int64)
    order = np.argsort(dsts, kind="stable")
    in_src = srcs[order].astype(np.int64)
    in_ptr = np.zeros(offset + 1, dtype=np.int64)
    np.cumsum(np.bincount(dsts, minlength=offset), out=in_ptr[1:])
    column_arr = np.concatenate(column).astype(np.int64) if column else np.zeros(0, np.int64)
    final_arr = np.concatenate(final_all) if final_all else np.zeros(0, bool)
    return GraphBatch(column_arr, in_ptr, in_src, *_by_source(in_ptr, in_src), final_arr,
                      lo.copy(), lo, hi.copy(), hi)


# --------------------------------------------------------------------------------------------
# Denominator: T itself (eq. 5), factored through one epsilon node


@lru_cache(maxsize=64)
def denominator(topology: str, num_phones: int, blank: int = 0) -> GraphBatch:
    """The token graph ``T`` of eq. (5) over P phones, for one utterance (``lo = 0``).

    Nodes: the hub 0 (blank), phone state ``(p, s)`` at ``1 + (p-1) x + s`` (its token id),
    and the epsilon node ``G = 1 + P x`` (see the module doc).  Accepts the same token
    sequences as ``topology.arcs(topology, P)``, each with the same number of paths.
    Cached: the arrays are shared, never write to them.
    """
    topo = get(topology)
    x = topo.states
    exits = topo.exit_states
    within = topo.within()
    if topo.ctc_rule:
        # The missing arc "exit of p -> p0 starting a second p" is stood for by G -> p0 only
        # if each exit state of p already has a within arc to p0 with p0's token (a loop).
        absorbed = [(s, 0) for s in exits]
        if any(arc not in within for arc in absorbed):
            raise NotImplementedError(f"{topo.name}: CTC's rule without a loop to state 0")
        within = [arc for arc in within if arc not in absorbed]
    hub, gather = 0, 1 + num_phones * x
    size = gather + 1

    def node(p: int, s: int) -> int:
        return 1 + (p - 1) * x + s

    into: list[list[int]] = [[] for _ in range(size)]
    into[hub] = [gather]
    for p in range(1, num_phones + 1):
        into[node(p, 0)].append(gather)
        for a, b in within:
            into[node(p, b)].append(node(p, a))
    into[gather] = [hub] + [node(p, s) for p in range(1, num_phones + 1) for s in exits]

    cols = columns(topo, num_phones, blank)
    column = np.concatenate([cols, [EPSILON]]).astype(np.int64)
    in_ptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum([len(srcs) for srcs in into], out=in_ptr[1:])
    in_src = np.array([s for srcs in into for s in srcs], dtype=np.int64)
    final = np.zeros(size, dtype=bool)
    final[hub] = True
    for p in range(1, num_phones + 1):
        final[[node(p, s) for s in exits]] = True
    graph = GraphBatch(column, in_ptr, in_src, *_by_source(in_ptr, in_src), final,
                       np.array([hub]), np.array([0]), np.array([gather]), np.array([size]))
    for a in (graph.column, graph.in_ptr, graph.in_src, graph.out_ptr, graph.out_dst,
              graph.final):
        a.flags.writeable = False
    return graph
