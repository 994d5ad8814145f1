"""The eight token topologies of the CTC-topologies paper (Zhao et al., Fig. 1), written once as
data, and the token FST ``T`` each one defines.

A topology ``Sx-Ty`` has ``x`` emitting states per phone and needs at least ``y`` frames to
traverse one phone; each ★ adds a self-loop (``docs``: ``../shared/TOPOLOGIES.md``). Every
topology has the shared optional blank: one blank token with a self-loop that may occur
between phones and at both ends, or not at all. For S1-T1 it is exactly CTC, including CTC's
rule that two identical consecutive phones need a blank between them.

Token layout (loss, graphs and decoders alike): token 0 is blank; for phone ``p`` in 1..P and
state ``s`` in 0..x-1 the token is ``1 + (p - 1) * x + s``, so a network for ``Sx-Ty`` over P
phones has ``1 + P * x`` outputs (:func:`num_tokens`).

The FST is epsilon-free on its input side, so that composing it with an emission FST, and the
graph loss's forward pass, never meet an input epsilon. State 0 is the hub: start, final, and
the blank state. State ``(p, s)`` means "the last frame emitted phone p's state s". Arcs:

- hub --blank--> hub (the blank self-loop);
- hub --(q,0)--> (q, 0), outputting ``q`` (a phone starts);
- (p, s) --(p,s)--> (p, s) for each self-loop state; (p, s) --(p,s+1)--> (p, s+1) along the
  chain; (p, s) --(p,t)--> (p, t) for each skip inside the phone;
- from each state a phone may end in (the last, or one with a skip to the exit): --blank-->
  hub, and --(q,0)--> (q, 0) outputting ``q`` for every phone ``q`` (``q != p`` under CTC's
  rule), and the state is final.

FST labels follow OpenFst's and Kaldi's conventions: 0 is epsilon, so an input label is
``token + 1`` (``kaldi_decoder.DecodableCtc`` reads ``logp[t, ilabel - 1]``) and an output label
is the phone id 1..P.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speechlab.errors import ConfigError

EXIT = -1  # the target of a skip that leaves the phone

# The most phones a token FST is built for. Every phone-ending state has an arc into every
# phone, so T has about N^2 arcs (1000 phones: 1M arcs, 0.6 GB while built); phone sets hold
# tens to a few hundred phones, and 10,000 would need some 60 GB.
MAX_PHONES = 1000
MAX_PHONES_WHY = "phone sets hold tens to hundreds; the token FST has about N^2 arcs"


@dataclass(frozen=True)
class Topology:
    """One ``Sx-Ty`` topology. ``loops`` are the states with a self-loop; ``skips`` are arcs
    ``(from, to)`` besides the chain ``0 -> 1 -> ... -> x-1 -> exit`` (``to`` may be
    :data:`EXIT`); ``ctc_rule``: a phone cannot follow itself without a blank between."""

    name: str
    states: int
    min_frames: int
    loops: tuple[int, ...]
    skips: tuple[tuple[int, int], ...] = ()
    ctc_rule: bool = False

    @property
    def exit_states(self) -> tuple[int, ...]:
        """The states a phone may end in."""
        return tuple(sorted({self.states - 1} | {a for a, b in self.skips if b == EXIT}))

    def within(self) -> list[tuple[int, int]]:
        """Arcs between the states of one phone, ``(from, to)``: loops, chain, inner skips."""
        arcs = [(s, s) for s in self.loops]
        arcs += [(s, s + 1) for s in range(self.states - 1)]
        arcs += [(a, b) for a, b in self.skips if b != EXIT]
        return arcs


# Fig. 1 of the paper as data (speechlab's reading of the naming rule, TOPOLOGIES.md).
TOPOLOGIES: dict[str, Topology] = {t.name: t for t in (
    Topology("S1-T1", 1, 1, loops=(0,), ctc_rule=True),
    Topology("S2-T1", 2, 1, loops=(1,), skips=((0, EXIT),)),
    Topology("S2-T1★", 2, 1, loops=(0, 1), skips=((0, EXIT),)),
    Topology("S2-T2★", 2, 2, loops=(0, 1)),
    Topology("S2-T2", 2, 2, loops=(1,)),
    Topology("S3-T2", 3, 2, loops=(1,), skips=((0, 2),)),
    # The authors' ``3state-skip-1``: the extra self-loop is on the last state, a0 a1* a2+.
    Topology("S3-T2★", 3, 2, loops=(1, 2), skips=((0, 2),)),
    Topology("S3-T2★★", 3, 2, loops=(0, 1, 2), skips=((0, 2),)),
)}

# Plain-ASCII names for command lines and file names: "S2-T1*" is "S2-T1★".
ASCII_NAMES = {name.replace("★", "*"): name for name in TOPOLOGIES}


def get(name: str) -> Topology:
    """The topology ``name`` (``★`` may be written ``*``)."""
    topo = TOPOLOGIES.get(ASCII_NAMES.get(name, name))
    if topo is None:
        raise ConfigError(f"unknown topology {name!r}; choose one of {', '.join(TOPOLOGIES)}")
    return topo


def num_tokens(name: str, num_phones: int) -> int:
    """Network outputs for ``name`` over ``num_phones`` phones: blank + phones x states."""
    return 1 + num_phones * get(name).states


def token(topo: Topology, phone: int, state: int) -> int:
    """The token id of ``phone`` (1..P) in ``state`` (0..x-1)."""
    return 1 + (phone - 1) * topo.states + state


@dataclass(frozen=True)
class Arcs:
    """A graph as arrays, the form the graph loss and tests use (S states, A arcs).

    ``src``, ``dst`` (A,) state ids; ``token`` (A,) the token each arc consumes (one frame);
    ``label`` (A,) the phone it outputs (0: none); ``start`` the start state; ``final`` (S,)
    bool.
    """

    num_states: int
    src: np.ndarray
    dst: np.ndarray
    token: np.ndarray
    label: np.ndarray
    start: int
    final: np.ndarray


def arcs(name: str, num_phones: int) -> Arcs:
    """The token graph ``T`` of topology ``name`` over phones 1..``num_phones`` as arrays."""
    topo = get(name)
    if num_phones < 1:
        raise ConfigError(f"a topology needs at least one phone, got {num_phones}")
    if num_phones > MAX_PHONES:
        raise ConfigError(f"{num_phones} phones: at most {MAX_PHONES} ({MAX_PHONES_WHY})")
    x = topo.states

    def state(p: int, s: int) -> int:
        return 1 + (p - 1) * x + s  # the hub is 0; a phone state's id is its token id

    rows: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)]  # the blank self-loop
    phones = range(1, num_phones + 1)
    rows += [(0, state(q, 0), token(topo, q, 0), q) for q in phones]
    for p in phones:
        rows += [(state(p, a), state(p, b), token(topo, p, b), 0) for a, b in topo.within()]
        for s in topo.exit_states:
            rows.append((state(p, s), 0, 0, 0))
            rows += [(state(p, s), state(q, 0), token(topo, q, 0), q) for q in phones
                     if not (topo.ctc_rule and q == p)]
    table = np.array(rows, dtype=np.int64)
    final = np.zeros(1 + num_phones * x, dtype=bool)
    final[0] = True
    for p in phones:
        for s in topo.exit_states:
            final[state(p, s)] = True
    return Arcs(1 + num_phones * x, table[:, 0], table[:, 1], table[:, 2], table[:, 3], 0, final)


def to_fst(graph: Arcs):
    """An :class:`Arcs` graph as a ``kaldifst.StdVectorFst`` (input label token + 1, output
    label the phone, weight 0), arc-sorted on input labels."""
    import kaldifst

    fst = kaldifst.StdVectorFst()
    for _ in range(graph.num_states):
        fst.add_state()
    fst.start = graph.start
    for s in np.flatnonzero(graph.final):
        fst.set_final(int(s), 0.0)
    for a, b, t, l in zip(graph.src.tolist(), graph.dst.tolist(), graph.token.tolist(),
                          graph.label.tolist()):
        fst.add_arc(a, kaldifst.StdArc(t + 1, l, 0.0, b))
    kaldifst.arcsort(fst, sort_type="ilabel")
    return fst


def build(name: str, num_phones: int):
    """The token FST ``T`` of topology ``name`` over ``num_phones`` phones (a
    ``kaldifst.StdVectorFst``; see the module doc for its labels)."""
    return to_fst(arcs(name, num_phones))
