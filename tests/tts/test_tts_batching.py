"""The stateful batcher: every training frame once per epoch, streams continue, state carried."""

import numpy as np
import pytest
import torch

from speechlab.tts.batching import StreamBatches
from speechlab.tts.features import TtsUtteranceData
from speechlab.tts.task import TtsTask, TtsTaskConfig


def _utts(lengths, dim=3):
    utts = []
    for k, n in enumerate(lengths):
        phone_x = np.full((n, dim), k, np.float32)          # one "phone" per frame
        extra = np.stack([np.full(n, k), np.arange(n)], 1).astype(np.float32)
        y = np.arange(n, dtype=np.float32)[:, None].repeat(2, 1)
        utts.append(TtsUtteranceData(f"u{k}", phone_x, np.arange(n), extra, y, ["a"] * n))
    return utts


@pytest.mark.parametrize("stateful", [True, False])
def test_every_frame_exactly_once_per_epoch(stateful):
    lengths = [37, 5, 101, 64, 13]
    b = StreamBatches(_utts(lengths), streams=4, window=10, stateful=stateful, seed=3)
    for _ in range(2):  # two epochs
        seen = np.concatenate([next(b).frames.ravel() for _ in range(b.batches_per_epoch)])
        seen = seen[seen >= 0]
        assert sorted(seen.tolist()) == list(range(sum(lengths)))


def test_streams_continue_from_batch_to_batch():
    b = StreamBatches(_utts([50, 30, 40]), streams=3, window=7, seed=0)
    first, second = next(b), next(b)
    assert first.first and not second.first and second.offset == 7
    # row s of batch 2 is the next 7 frames of the epoch's concatenation after row s of batch 1
    order, _ = b._epoch_plan()
    for s in range(3):
        assert first.frames[s].tolist() == order[s * 40: s * 40 + 7].tolist()
        assert second.frames[s].tolist() == order[s * 40 + 7: s * 40 + 14].tolist()
    # the inputs are the frames' own: extra[:, 1] is the frame's index in its utterance
    x = first.x[0, :, -1].tolist()
    assert x == [float(b.extra[i, 1]) for i in first.frames[0]]


def test_shuffled_windows_are_the_stateful_ones_reordered_each_from_the_zero_state():
    utts = _utts([50, 30, 40])
    stateful = StreamBatches(utts, streams=3, window=7, seed=0)
    shuffled = StreamBatches(utts, streams=3, window=7, stateful=False, seed=0)
    a = [next(stateful) for _ in range(stateful.batches_per_epoch)]
    b = [next(shuffled) for _ in range(shuffled.batches_per_epoch)]
    # stateful: only the epoch's first batch starts from the zero state, the others continue
    assert [x.first for x in a] == [True] + [False] * (len(a) - 1)
    assert [x.offset for x in a] == [7 * k for k in range(len(a))]
    # shuffled: every batch restarts the state at position 0
    assert all(x.first and x.offset == 0 for x in b)
    # the same windows (each a run of the epoch's frames), in another order across batches
    rows = lambda batches: sorted(tuple(r) for x in batches for r in x.frames.tolist())
    assert rows(a) == rows(b)
    assert [x.frames.tolist() for x in a] != [x.frames.tolist() for x in b]
    # the inputs and lengths follow the shuffled frames
    for x in b:
        assert x.lens.tolist() == (x.frames >= 0).sum(1).tolist()
        real = x.frames[0][x.frames[0] >= 0]
        assert x.y[0, : len(real), 0].tolist() == [float(shuffled.y[i, 0]) for i in real]


def test_resume_gives_the_same_batches():
    a = StreamBatches(_utts([50, 30, 40]), streams=3, window=7, seed=1)
    for _ in range(9):
        next(a)
    b = StreamBatches(_utts([50, 30, 40]), streams=3, window=7, seed=1)
    b.load_state_dict(a.state_dict())
    assert np.array_equal(next(a).frames, next(b).frames)


class _Recorder(torch.nn.Module):
    """Counts how many frames it has seen on each row: the carried state."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def init_state(self, batch):
        return (torch.zeros(batch),)

    def streaming_forward(self, x, x_lens, state):
        return x[..., :2] * 0 + self.w, x_lens, (state[0] + x_lens,)


def test_task_carries_state_within_an_epoch_and_resets_at_its_start():
    utts = _utts([50, 30, 40])
    task = TtsTask(utts, utts, None, TtsTaskConfig(streams=3, window=7, valid_window=0))
    batches, model = task.batches(), _Recorder()
    for k in range(batches.batches_per_epoch):
        task.loss(model, next(batches))
    assert task.state[0].sum() == 120  # every frame of the epoch counted once
    task.loss(model, next(batches))   # a new epoch starts from zero
    assert task.state[0].tolist() == [7, 7, 7]
