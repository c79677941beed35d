"""Training batches from shards (issue 65): every pair once per epoch through shuffle windows that span shards, the
unsharded batching when the corpus fits one window, disjoint DDP ranks, an exact position to resume from, and
corpora mixed by weight and temperature."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from adlnmt.data import prepare as prepare_module
from adlnmt.data.data_dir import DataDir
from adlnmt.data.dataset import bucket, collate, make_batches
from adlnmt.data.demo import write_demo_corpus
from adlnmt.data.prepare import Corpus, prepare
from adlnmt.data.stream import EpochBatches, EpochPlan, ShardedTrainData, dealt_after, epoch_counts
from adlnmt.errors import DataError


def write_lines(path: Path, items: list[str]) -> Path:
    path.write_text("".join(item + "\n" for item in items), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two data directories of the same 1,500 pairs: one shard, and two corpora (900 + 600) in 4 + 2 shards."""
    root = tmp_path_factory.mktemp("stream")
    write_demo_corpus(root / "demo", size=1500, seed=11)
    demo = root / "demo"
    prepare(demo / "train.src", demo / "train.tgt", demo / "valid.src", demo / "valid.tgt", root / "one",
            vocab_size=200)  # fmt: skip
    src, tgt = (demo / "train.src").read_text().splitlines(), (demo / "train.tgt").read_text().splitlines()
    parts = []
    for name, part, weight in (("a-x", slice(0, 900), 1.0), ("b-x", slice(900, 1500), 2.0)):
        files = write_lines(root / f"{name}.src", src[part]), write_lines(root / f"{name}.tgt", tgt[part])
        parts.append(Corpus(name, *files, weight))
    valid = [Corpus("a-x", demo / "valid.src", demo / "valid.tgt")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prepare_module, "CHUNK_PAIRS", 100)
        prepare(out_dir=root / "many", corpora=parts, valid=valid, vocab_size=200, shard_size=250)
    return {"one": root / "one", "many": root / "many"}


def train_data(path: Path, weighted: bool = False) -> ShardedTrainData:
    """The training data of ``path``; unless ``weighted``, its corpora's weights (b-x: 2) set to 1, so that an epoch
    holds every pair once."""
    train = ShardedTrainData(DataDir.load(path))
    if not weighted:
        train.weights = [1.0] * len(train.weights)
    return train


def flat(batches: list[np.ndarray]) -> list[int]:
    return [int(i) for b in batches for i in b]


def test_the_shards_are_laid_out_as_asked(corpora: dict[str, Path]) -> None:
    data = DataDir.load(corpora["many"])
    assert [(s["corpus"], s["pairs"]) for s in data.shards("train")] == [
        ("a-x", 300), ("a-x", 300), ("a-x", 300), ("b-x", 300), ("b-x", 300)]  # fmt: skip


def test_one_window_batches_as_the_unsharded_data(corpora: dict[str, Path]) -> None:
    train = train_data(corpora["one"])
    split = DataDir.load(corpora["one"]).split("train")
    for mixed in (False, True):
        plan = EpochPlan(train, 400, seed=3, buffer=10_000, temperature=1.0, mixed_lengths=mixed)
        for epoch in (0, 4):
            expected = make_batches(split, 400, 3, epoch, mixed_lengths=mixed)
            got = list(EpochBatches(plan, epoch))
            assert len(got) == len(expected) and all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))


@pytest.mark.parametrize("buffer", [1, 170, 600, 1500])
def test_every_pair_exactly_once_per_epoch_through_windows_across_shards(corpora: dict[str, Path],
                                                                         buffer: int) -> None:  # fmt: skip
    train = train_data(corpora["many"])
    plan = EpochPlan(train, 300, seed=1, buffer=buffer, temperature=1.0)
    assert plan.windows == -(-1500 // buffer)
    orders = []
    for epoch in (0, 1):
        ids = flat(list(EpochBatches(plan, epoch)))
        assert sorted(ids) == list(range(1500))
        orders.append(ids)
    assert orders[0] != orders[1]
    again = flat(list(EpochBatches(EpochPlan(train, 300, seed=1, buffer=buffer, temperature=1.0), 0)))
    assert again == orders[0]
    other_seed = flat(list(EpochBatches(EpochPlan(train, 300, seed=2, buffer=buffer, temperature=1.0), 0)))
    assert other_seed != orders[0]


def test_a_window_spans_shards_and_respects_the_token_budget(corpora: dict[str, Path]) -> None:
    train = train_data(corpora["many"])
    plan = EpochPlan(train, 300, seed=1, buffer=400, temperature=1.0)
    windows = [plan.window_ids(0, w) for w in range(4)]
    assert [len(ids) for ids in windows] == [375] * 4
    shards = [set((np.searchsorted(train.bases, ids, side="right") - 1).tolist()) for ids in windows]
    assert max(len(s) for s in shards) >= 3  # a window of pairs of three shards
    assert all(set(np.isin(ids, np.arange(900)).tolist()) == {True, False} for ids in windows)  # both corpora
    for batch in plan.window_batches(0, 1):
        src, tgt = train.lengths(np.sort(batch))
        assert len(batch) == 1 or max(src.max(), tgt.max()) * len(batch) <= 300


def test_batches_collate_from_shards_as_from_the_single_array(corpora: dict[str, Path]) -> None:
    one, many = DataDir.load(corpora["one"]).split("train"), train_data(corpora["many"])
    ids = np.array([0, 299, 300, 899, 900, 1499])
    a, b = collate(one, ids), collate(many, ids)
    assert a.src.equal(b.src) and a.tgt_in.equal(b.tgt_in) and a.tgt_out.equal(b.tgt_out)


def test_ddp_ranks_read_disjoint_batches(corpora: dict[str, Path]) -> None:
    train = train_data(corpora["many"])
    batches = [list(EpochBatches(EpochPlan(train, 300, 1, 400, 1.0, rank=r, world=3), 0)) for r in range(3)]
    assert len({len(b) for b in batches}) == 1  # every rank makes the same number of updates
    seen = Counter(i for rank in batches for i in flat(rank))
    assert max(seen.values()) == 1
    single = EpochPlan(train, 300, 1, 400, 1.0)
    kept = []  # of each window's batches, all but the last (< 3) that do not fill a round of the ranks
    for window in range(single.windows):
        window_batches = single.window_batches(0, window)
        kept += flat(window_batches[: len(window_batches) // 3 * 3])
    assert sorted(seen) == sorted(kept) and len(kept) > 1400


@pytest.mark.parametrize("buffer", [200, 1500])
def test_every_position_resumes_to_the_same_batches(corpora: dict[str, Path], buffer: int) -> None:
    train = train_data(corpora["many"])
    plan = EpochPlan(train, 300, seed=5, buffer=buffer, temperature=2.0)
    straight = EpochBatches(plan, 2)
    positions, batches = [], []
    while not straight.done:
        positions.append(straight.position)
        batches.append(straight.take(1)[0])
    for k, (window, dealt, batch) in enumerate(positions):
        assert dealt == 0
        resumed = list(EpochBatches(EpochPlan(train_data(corpora["many"]), 300, 5, buffer, 2.0), 2, window, batch))
        assert len(resumed) == len(batches) - k
        assert all(np.array_equal(a, b) for a, b in zip(resumed, batches[k:], strict=True))


@pytest.mark.parametrize("worlds", [(3, 2, 3), (2, 3, 1), (1, 2, 2)])
def test_a_resume_with_another_number_of_ranks_deals_the_rest_of_the_window(
    corpora: dict[str, Path], worlds: tuple[int, ...]
) -> None:
    """Ranks of one number take 2 batches each, then (resumed) ranks of another number take 1 each, then ranks of a
    third number the rest of the window: no batch twice, none skipped but the < world left at the window's end."""
    train = train_data(corpora["many"])
    everything = EpochPlan(train, 300, 1, 1500, 1.0).window_batches(0, 0)  # one window: every batch, in order
    taken: list[list[np.ndarray]] = []
    dealt = 0
    for world, count in zip(worlds, (2, 1, None), strict=True):
        ranks = [EpochBatches(EpochPlan(train, 300, 1, 1500, 1.0, rank=r, world=world), 0, 0, 0, dealt)
                 for r in range(world)]  # fmt: skip
        parts = [ranks[r].take(count) if count else list(ranks[r]) for r in range(world)]
        assert len({len(part) for part in parts}) == 1  # every rank makes the same number of updates
        taken += parts
        dealt = dealt_after(dealt, len(parts[0]), world) if count else dealt
    seen = Counter(i for part in taken for i in flat(part))
    assert max(seen.values()) == 1
    last = worlds[-1]
    expected = everything[:dealt] + everything[dealt:][: (len(everything) - dealt) // last * last]
    assert sorted(seen) == sorted(flat(expected)) and len(expected) > len(everything) - last
    few = [list(EpochBatches(EpochPlan(train, 300, 1, 1500, 1.0, rank=r, world=2), 0, 0, 0, len(everything) - 1))
           for r in range(2)]  # fmt: skip
    assert few == [[], []]  # one batch left for two ranks: left out, as at the end of any window


def test_a_position_the_data_cannot_have_is_refused(corpora: dict[str, Path]) -> None:
    plan = EpochPlan(train_data(corpora["many"]), 300, seed=5, buffer=500, temperature=1.0)
    with pytest.raises(DataError, match="window 9"):
        EpochBatches(plan, 0, 9, 0)
    with pytest.raises(DataError, match="batch 999 of window 1"):
        EpochBatches(plan, 0, 1, 999)


def test_temperature_and_weights_set_the_epoch_counts() -> None:
    assert epoch_counts([900, 600], [1.0, 1.0], 1.0) == [900, 600]  # proportional: every pair once
    assert epoch_counts([900, 600], [1.0, 1.0], 1e9) == [750, 750]  # T → ∞: uniform
    assert epoch_counts([900, 600], [1.0, 3.0], 1.0) == [500, 1000]  # weight × size: 900 : 1800
    counts = epoch_counts([900, 600], [1.0, 1.0], 2.0)
    shares = np.sqrt([0.6, 0.4]) / np.sqrt([0.6, 0.4]).sum()
    assert sum(counts) == 1500 and abs(counts[0] - 1500 * shares[0]) <= 1
    assert epoch_counts([900, 600], [1e308, 1.0], 1.0) == [1500, 0]  # weight × size would overflow to inf, then NaN
    assert epoch_counts([900, 600], [2e307, 6e307], 1.0) == [500, 1000]  # the ratio is what counts


@pytest.mark.parametrize("temperature", [1e-3, 1e-4, 1e-9])
def test_a_small_temperature_draws_the_largest_corpus_alone(temperature: float) -> None:
    """T → 0: every pair from the corpus of the largest weight × size (the shares' powers underflowed to 0 / 0,
    which made negative counts and an epoch of no batches, over and over)."""
    assert epoch_counts([900, 600], [1.0, 1.0], temperature) == [1500, 0]
    assert epoch_counts([900, 600], [1.0, 3.0], temperature) == [0, 1500]
    assert epoch_counts([600, 600, 300], [1.0, 1.0, 1.0], temperature) == [750, 750, 0]  # a tie shares


def test_weighted_epochs_draw_the_planned_proportions(corpora: dict[str, Path]) -> None:
    train = train_data(corpora["many"], weighted=True)  # a-x: 900 pairs weight 1, b-x: 600 pairs weight 2
    plan = EpochPlan(train, 300, seed=1, buffer=400, temperature=1.0)
    assert plan.counts == [643, 857]  # 900 : 1200 of 1500
    assert plan.proportions() == {"a-x": (643, 643 / 1500), "b-x": (857, 857 / 1500)}
    for epoch in (0, 1):
        ids = flat(list(EpochBatches(plan, epoch)))
        drawn = Counter("a-x" if i < 900 else "b-x" for i in ids)
        assert drawn == {"a-x": 643, "b-x": 857}  # achieved = planned
        b_ids = Counter(i for i in ids if i >= 900)
        assert len(b_ids) == 600 and max(b_ids.values()) == 2  # upsampled: every b-x pair, some twice
        a_ids = [i for i in ids if i < 900]
        assert len(set(a_ids)) == 643  # downsampled: no a-x pair twice
    first, second = ({i for i in flat(list(EpochBatches(plan, e))) if i < 900} for e in (0, 1))
    assert first != second  # another sample of a-x every epoch
    for window in range(plan.windows):  # every window holds the corpora in the epoch's proportions
        ids = plan.window_ids(0, window)
        share = np.mean(ids < 900)
        assert abs(share - 643 / 1500) < 0.01


def greedy_reference(widths: list[int], budget: int) -> list[tuple[int, int]]:
    """The batching rule written out sentence by sentence (what ``bucket`` computes per batch with numpy)."""
    cuts, start, widest = [], 0, 0
    for position, width in enumerate(widths):
        if position > start and max(widest, width) * (position - start + 1) > budget:
            cuts.append((start, position))
            start, widest = position, 0
        widest = max(widest, width)
    return [*cuts, (start, len(widths))] if widths else cuts


@pytest.mark.parametrize("budget", [1, 7, 60, 400, 5000])
def test_the_token_budget_cuts_equal_the_rule_sentence_by_sentence(budget: int) -> None:
    rng = np.random.default_rng(budget)
    for widths in (rng.integers(1, 90, 3000), np.sort(rng.integers(1, 30, 3000)), np.full(50, 500), np.array([3])):
        batches = bucket(np.arange(len(widths)), widths, widths, budget, None)
        order = np.argsort(widths, kind="stable")  # no generator: sorted by length, ties in id order
        assert np.array_equal(np.concatenate(batches), order)
        expected = greedy_reference(widths[order].tolist(), budget)
        assert [len(b) for b in batches] == [stop - start for start, stop in expected]


def test_each_shard_is_opened_once_however_many_a_window_mixes(corpora: dict[str, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    data = DataDir.load(corpora["many"])
    opened = Counter()
    open_shard = data.open_shard

    def counting(split: str, index: int):
        opened[index] += 1
        return open_shard(split, index)

    monkeypatch.setattr(data, "open_shard", counting)
    train = ShardedTrainData(data)
    train.weights = [1.0, 1.0]
    plan = EpochPlan(train, 300, seed=1, buffer=1500, temperature=1.0)  # one window of all 5 shards
    for batch in EpochBatches(plan, 0):
        collate(train, batch)
    assert opened == dict.fromkeys(range(5), 1)


def test_only_the_shards_of_the_current_window_stay_open(corpora: dict[str, Path]) -> None:
    """An open shard holds its offsets in memory (computed from its lengths), so the shards kept open follow the
    window: those of earlier windows are closed, and reopened (with the same pairs) when read again."""
    train = train_data(corpora["many"])
    plan = EpochPlan(train, 300, seed=1, buffer=170, temperature=1.0)  # 9 windows over 5 shards
    held = set()
    for window in range(plan.windows):
        for batch in plan.window_batches(0, window):
            collate(train, batch)
        window_shards = set(np.searchsorted(train.bases, plan.window_ids(0, window), side="right") - 1)
        assert set(train._open) == window_shards
        held |= window_shards
    assert held == set(range(5)) and len(train._open) < 5
    first = plan.window_batches(0, 0)[0]
    assert collate(train, first).src.tolist() == collate(train_data(corpora["many"]), first).src.tolist()


def test_weighted_positions_resume_to_the_same_batches_on_every_rank(corpora: dict[str, Path]) -> None:
    """With the corpora's own weights (b-x upsampled: a second pass over it) and two ranks, every rank resumed at
    any of its positions reads the batches it would have read."""
    for rank in range(2):
        plan = EpochPlan(train_data(corpora["many"], weighted=True), 300, 4, 400, 1.0, rank=rank, world=2)
        straight, positions, batches = EpochBatches(plan, 1), [], []
        while not straight.done:
            positions.append(straight.position)
            batches.append(straight.take(1)[0])
        assert len({w for w, _, _ in positions}) == plan.windows == 4
        for k, (window, dealt, batch) in enumerate(positions):
            resumed = EpochPlan(train_data(corpora["many"], weighted=True), 300, 4, 400, 1.0, rank=rank, world=2)
            rest = list(EpochBatches(resumed, 1, window, batch, dealt))
            assert len(rest) == len(batches) - k
            assert all(np.array_equal(a, b) for a, b in zip(rest, batches[k:], strict=True))


def test_every_pair_keeps_its_corpus_tag_through_shuffled_windows(tmp_path: Path) -> None:
    """Target tags (several target languages): each pair a batch collates starts with its own corpus's tag, whatever
    shards and corpora the windows mix."""
    write_demo_corpus(tmp_path / "demo", size=600, seed=5)
    src, tgt = (tmp_path / "demo" / f"train.{side}" for side in ("src", "tgt"))
    lines = {side: path.read_text().splitlines() for side, path in (("src", src), ("tgt", tgt))}
    parts = []
    for name, part, weight in (("de-en", slice(0, 350), 1.0), ("en-de", slice(350, 500), 3.0),
                               ("de-fr", slice(500, 600), 2.0)):  # fmt: skip
        files = [write_lines(tmp_path / f"{name}.{side}", lines[side][part]) for side in ("src", "tgt")]
        parts.append(Corpus(name, *files, weight))
    valid = [Corpus("de-en", tmp_path / "demo" / "valid.src", tmp_path / "demo" / "valid.tgt")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prepare_module, "CHUNK_PAIRS", 50)
        prepare(out_dir=tmp_path / "data", corpora=parts, valid=valid, vocab_size=200, shard_size=100,
                target_tags=True)  # fmt: skip
    data = DataDir.load(tmp_path / "data")
    tags = [data.src_vocab.tag_id(f"<2{language}>") for language in ("en", "de", "fr")]
    assert len(set(tags)) == 3 and len(data.shards("train")) == 7
    train = ShardedTrainData(data)
    bounds = np.cumsum([c.pairs for c in train.corpora])
    plan = EpochPlan(train, 300, seed=2, buffer=230, temperature=1.5)
    seen = Counter()
    for batch in EpochBatches(plan, 1):
        owners = np.searchsorted(bounds, batch, side="right")
        assert collate(train, batch).src[:, 0].tolist() == [tags[k] for k in owners]
        seen.update(owners.tolist())
    assert sorted(seen) == [0, 1, 2] and sum(seen.values()) == 600
