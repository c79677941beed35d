"""What the acl18 code's dropout costs the ADL grids: the training step of a grid variant as the grid runs it
(the published strings through ``adlnmt.published.as_run``) against the same strings verbatim (no dropout inside the
layers), on random sentence pairs in the grid's batches, alternating the two.

    python benchmarks/acl18_dropout_cost.py --threads 1                      # ADL Table 5 cpu, self-att/self-att
    python benchmarks/acl18_dropout_cost.py --variant CNN/CNN --rounds 3

Run it on a quiet machine (pause a running grid with kill -STOP / -CONT); figures in NOTES.md ("Grid throughput").
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import torch

from adlnmt.adl.parser import parse
from adlnmt.adl.syntax import to_text
from adlnmt.bench.train import Updater, prepared_batches, random_pairs
from adlnmt.experiment.grid import load_grid
from adlnmt.model import Seq2Seq
from adlnmt.published import DECODERS, ENCODERS, as_run
from adlnmt.train.config import build_config

VOCAB = 8000
GRID = Path(__file__).resolve().parents[1] / "experiments" / "adl-table5.yaml"


def without_written_out_dropout(text: str) -> str:
    """``text`` with what ``as_run`` adds taken out again (checked on all 29 published strings in ``main``)."""
    text = re.sub(r"\(att_dropout=\$DROPOUT\)|, att_dropout=\$DROPOUT", "", text)
    return re.sub(r"\b((?:linear|mh_dot_self_att|mh_dot_att|cnn)(?:\([^()]*\))?) -> dropout", r"\1", text)


def seconds_per_update(options: dict, warmup: int, updates: int) -> float:
    config = build_config(options).resolved()
    torch.manual_seed(1)
    model = Seq2Seq(config.model_config(VOCAB, VOCAB))
    device = torch.device("cpu")
    batches = prepared_batches(random_pairs(warmup + updates, config.batch_tokens, VOCAB, 1), config.batch_tokens,
                               warmup + updates, 1, device)  # fmt: skip
    updater = Updater(config, model, device)
    for batch in batches[:warmup]:
        updater.update(batch)
    start = time.perf_counter()
    for batch in batches[warmup:]:
        updater.update(batch)
    return (time.perf_counter() - start) / updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", default=str(GRID))
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--variant", default="self-att/self-att")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for text in (*ENCODERS.values(), *DECODERS.values()):
        assert without_written_out_dropout(as_run(text)) == to_text(parse(text)), text
    train = dict(load_grid(args.grid, args.scale).variant(args.variant).train)
    forms = {"as run": train, "verbatim": {**train, **{side: without_written_out_dropout(train[side])
                                                      for side in ("encoder", "decoder")}}}  # fmt: skip
    found: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(args.rounds):
        for name, options in forms.items():
            found[name].append(seconds_per_update(options, args.warmup, args.updates))
    for name, values in found.items():
        print(f"{args.variant} {name}: " + " / ".join(f"{v:.3f}" for v in values) + " s per update", flush=True)


if __name__ == "__main__":
    main()
