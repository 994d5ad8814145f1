"""Numba kernel for one frame of CTC prefix beam search (``prefix_search.py`` holds the API).

The beam is a set of rows (H of them): per row ``pb``, ``pnb`` (log-sums over the alignments
ending in blank / in the last label), ``lm`` (LM score so far), ``last`` label (-1: none),
``node`` (lexicon trie node), ``hist`` (interned word history), ``pid`` (interned prefix).
A prefix is interned as ``(parent pid, label, word emitted or -1)`` -> pid in ``prefixes``
(a typed dict keyed by one int64), so an extension and the row that already holds its prefix
meet by key: that is how the alignments of one prefix are summed whichever frame they arrive
on. Pruning uses the beam core's rule (:func:`speechlab.search.beam.select_kernel`).
"""

from __future__ import annotations


import numba
import numpy as np

from speechlab.search.beam import select_kernel
from speechlab.nn.logmath import log_add as _log_add

NEG_INF = -np.inf




@numba.njit(cache=True, inline="always")
def _lookup(d, key):
    """d[key], or -1 (numba's dict.get gives an Optional)."""
    if key in d:
        return d[key]
    return -1


@numba.njit(cache=True, inline="always")
def _intern(table, key):
    """(id of ``key`` in an intern table, whether it is new): a key seen for the first time gets
    the next id. The caller records a new id's parent and label; passing those arrays in here
    instead was measured 2.5% slower (numba counts references to them on every call)."""
    i = _lookup(table, key)
    if i >= 0:
        return i, False
    i = len(table) + 1
    table[key] = i
    return i, True


@numba.njit(cache=True)
def new_tables():
    """Empty intern tables: prefixes and word histories (key -> id; id 0 is the empty one)."""
    prefixes = numba.typed.Dict.empty(numba.types.int64, numba.types.int64)
    hists = numba.typed.Dict.empty(numba.types.int64, numba.types.int64)
    return prefixes, hists


@numba.njit(cache=True, nogil=True)
def step(pb, pnb, lm, last, node, hist, pid, row, blank, labels, lexicon, child, we_row,
         we_word, we_lm, alpha, beam, threshold, key_v, key_w, prefixes, p_parent, p_label,
         hists, h_parent, h_word):
    """Advance the rows by one frame.

    Args:
        row: (V+1,) the frame's log-probs with -inf appended (what ``last = -1`` reads).
        labels: (L,) labels tried on this frame (blank excluded; may be empty).
        lexicon: whether labels must spell pronunciations; child: (N, V+1) the lexicon trie,
            child node by label (-1: none).
        we_row, we_word, we_lm: word ends available: row, word id, LM score it adds
            (computed in Python, the LM being Python); empty without lexicon.
        key_v, key_w: V+1 and number of words + 1, to pack (pid, label, word) in an int64.
        prefixes, p_parent, p_label: prefix intern table and, per pid, parent pid and label.
        hists, h_parent, h_word: the same for word histories.

    Returns:
        the new rows (pb, pnb, lm, last, node, hist, pid) and the (maybe grown) p_parent,
        p_label, h_parent, h_word.
    """
    H = pb.shape[0]
    total = np.empty(H)
    stay_pb = np.empty(H)
    stay_pnb = np.empty(H)
    for i in range(H):
        total[i] = _log_add(pb[i], pnb[i])
        stay_pb[i] = total[i] + row[blank]
        stay_pnb[i] = pnb[i] + row[last[i]]
    n_lab = labels.shape[0]
    if n_lab == 0:  # no prefix can change: only the sums move
        return (stay_pb, stay_pnb, lm, last, node, hist, pid, p_parent, p_label, h_parent,
                h_word)
    # rows by pid, to find the row an extension's prefix already has
    row_of = numba.typed.Dict.empty(numba.types.int64, numba.types.int64)
    for i in range(H):
        row_of[pid[i]] = i
    cap = H * n_lab + we_row.shape[0] * n_lab + 1
    c_row = np.empty(cap, np.int64)
    c_lab = np.empty(cap, np.int64)
    c_word = np.empty(cap, np.int64)  # index into we_* (-1: the current word goes on)
    c_ext = np.empty(cap)
    c_score = np.empty(cap)
    n = 0
    for li in range(n_lab):
        c = labels[li]
        for p in range(H):
            e = (pb[p] if last[p] == c else total[p]) + row[c]
            if e == NEG_INF:
                continue
            if lexicon and child[node[p], c] < 0:
                continue
            key = (pid[p] * key_v + c) * key_w
            r = _lookup(row_of, _lookup(prefixes, key))
            if r >= 0:  # already a row: sum the alignments into it
                stay_pnb[r] = _log_add(stay_pnb[r], e)
                continue
            c_row[n] = p
            c_lab[n] = c
            c_word[n] = -1
            c_ext[n] = e
            c_score[n] = alpha * e + lm[p]
            n += 1
        if lexicon and child[0, c] >= 0:
            for j in range(we_row.shape[0]):
                p = we_row[j]
                e = (pb[p] if last[p] == c else total[p]) + row[c]
                if e == NEG_INF or we_lm[j] == NEG_INF:
                    continue
                key = (pid[p] * key_v + c) * key_w + we_word[j] + 1
                r = _lookup(row_of, _lookup(prefixes, key))
                if r >= 0:
                    stay_pnb[r] = _log_add(stay_pnb[r], e)
                    continue
                c_row[n] = p
                c_lab[n] = c
                c_word[n] = j
                c_ext[n] = e
                c_score[n] = alpha * e + lm[p] + we_lm[j]
                n += 1
    scores = np.empty(H + n)
    for i in range(H):
        scores[i] = alpha * _log_add(stay_pb[i], stay_pnb[i]) + lm[i]
    scores[H:] = c_score[:n]
    keep = select_kernel(scores, beam, threshold)
    m = 0
    while m < keep.shape[0] and scores[keep[m]] > NEG_INF:
        m += 1
    # the intern tables grow here, not in the loop below (numba would count references
    # on every iteration of a loop that may reassign them)
    p_parent = _reserve(p_parent, len(prefixes) + m + 2)
    p_label = _reserve(p_label, len(prefixes) + m + 2)
    h_parent = _reserve(h_parent, len(hists) + m + 2)
    h_word = _reserve(h_word, len(hists) + m + 2)
    o_pb = np.empty(m)
    o_pnb = np.empty(m)
    o_lm = np.empty(m)
    o_last = np.empty(m, np.int64)
    o_node = np.empty(m, np.int64)
    o_hist = np.empty(m, np.int64)
    o_pid = np.empty(m, np.int64)
    for t in range(m):
        i = keep[t]
        if i < H:
            o_pb[t] = stay_pb[i]
            o_pnb[t] = stay_pnb[i]
            o_lm[t] = lm[i]
            o_last[t] = last[i]
            o_node[t] = node[i]
            o_hist[t] = hist[i]
            o_pid[t] = pid[i]
            continue
        k = i - H
        p = c_row[k]
        c = c_lab[k]
        j = c_word[k]
        w = -1 if j < 0 else we_word[j]
        o_pb[t] = NEG_INF
        o_pnb[t] = c_ext[k]
        o_lm[t] = c_score[k] - alpha * c_ext[k]
        o_last[t] = c
        if not lexicon:
            o_node[t] = 0
            o_hist[t] = 0
        elif j < 0:
            o_node[t] = child[node[p], c]
            o_hist[t] = hist[p]
        else:
            o_node[t] = child[0, c]
            h, new = _intern(hists, hist[p] * key_w + w + 1)
            if new:
                h_parent[h] = hist[p]
                h_word[h] = w
            o_hist[t] = h
        q, new = _intern(prefixes, (pid[p] * key_v + c) * key_w + w + 1)
        if new:
            p_parent[q] = pid[p]
            p_label[q] = c
        o_pid[t] = q
    return o_pb, o_pnb, o_lm, o_last, o_node, o_hist, o_pid, p_parent, p_label, h_parent, h_word


@numba.njit(cache=True)
def _reserve(a, need):
    if need <= a.shape[0]:
        return a
    out = np.full(max(need, 2 * a.shape[0]), -1, a.dtype)
    out[: a.shape[0]] = a
    return out
