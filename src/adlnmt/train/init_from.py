"""``adlnmt train --init-from MODEL``: start from another model's weights and vocabulary (a pretrained or imported
model, or any trained one), and architecture surgery.

The new model is MODEL's configuration (width, heads, ties, variables), with the encoder/decoder ADL of
``--encoder``/``--decoder`` or ``--preset`` when given (surgery: e.g. the decoder's self-attention replaced by ``aan``,
or one block fewer; one side given alone keeps MODEL's other side). The data must be encoded with MODEL's
sentencepiece models (``adlnmt prepare --vocab-from MODEL``); other data is refused. At update 0 every tensor whose
path (its name in the state dict, i.e. its place in the layer tree) and shape match is copied from MODEL's checkpoint
and the rest keeps its fresh initialisation; which is which is printed and written to ``init_from.json`` in the new
model directory, with the digest of MODEL's version. A resumed run continues from its own checkpoints and never reads
MODEL's weights again, but refuses to go on when MODEL changed since (it would no longer be the run its settings
name). A grid's variants start from one pretrained model the same way (``train.init_from``:
:mod:`adlnmt.experiment.grid`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import torch

from adlnmt.data.data_dir import SIDES, DataDir
from adlnmt.errors import UserError
from adlnmt.model import Seq2Seq
from adlnmt.model_config import ModelConfig
from adlnmt.store import ModelDir, is_export_dir
from adlnmt.store.atomic import atomic_write, file_sha256, read_json_object
from adlnmt.store.names import EXPORT_MANIFEST, INIT_FROM
from adlnmt.train.config import TrainConfig


def check_vocabulary(init_dir: Path, data: DataDir) -> None:
    """Refuse ``data`` unless it was encoded with the sentencepiece models of the model in ``init_dir``."""
    vocabulary = ModelDir(init_dir).vocabularies()
    for side in SIDES:
        mine = vocabulary.path / vocabulary.manifest["spm"][side]
        theirs = data.path / data.manifest["spm"][side]
        if file_sha256(mine) != file_sha256(theirs):
            raise UserError(
                f"{data.path}: prepared with another {side} vocabulary than {init_dir} ({theirs.name} "
                f"differs from {mine}); prepare it with: adlnmt prepare --vocab-from {init_dir}"
            )
    theirs_markers = bool(data.manifest.get("source_markers", False))
    if bool(vocabulary.manifest.get("source_markers", False)) != theirs_markers:
        raise UserError(
            f"{data.path}: prepared {'with' if theirs_markers else 'without'} --source-markers, but {init_dir} was "
            f"trained {'without' if theirs_markers else 'with'} them (a BOS before every source); prepare it again "
            f"with: adlnmt prepare --vocab-from {init_dir}"
        )


def check_pretrained(init_dir: Path) -> None:
    """Refuse ``init_dir`` unless it is a model directory with a best checkpoint (what ``--init-from`` reads)."""
    if is_export_dir(init_dir):  # else "no config.json", as if the folder were anything
        raise UserError(f"{init_dir}: an export ({EXPORT_MANIFEST}), not a model directory; --init-from starts from a "
                        "model directory (adlnmt train's or adlnmt import's), e.g. the one exported")  # fmt: skip
    model_dir = ModelDir(init_dir)
    model_dir.config()  # a clear error when it is no model directory, or a damaged one
    if not model_dir.best_weights.is_file():
        raise UserError(f"{init_dir}: no {model_dir.best_weights.name} (the best checkpoint --init-from starts from)")


def pretrained_model_config(config: TrainConfig) -> ModelConfig:
    """The configuration of the model ``--init-from`` starts: MODEL's, with the ADL of the options when given
    (``--encoder`` or ``--decoder`` alone keeps MODEL's other side)."""
    assert config.init_from is not None
    check_pretrained(Path(config.init_from))
    base = ModelConfig(**ModelDir(config.init_from).config()["model"])
    check_sizes(config, base)
    if not (config.preset or config.encoder or config.decoder):
        return base
    if not config.preset:
        config = replace(config, encoder=config.encoder or base.encoder, decoder=config.decoder or base.decoder)
    given = config.model_config(base.src_vocab_size, base.tgt_vocab_size)
    if config.preset:  # the preset's architecture, input feeding included (rnmt's), at MODEL's sizes
        return replace(base, encoder=given.encoder, decoder=given.decoder, input_feeding=given.input_feeding)
    return replace(base, encoder=given.encoder, decoder=given.decoder)


def check_sizes(config: TrainConfig, base: ModelConfig) -> None:
    """Refuse a model option set to other than its default and other than MODEL's, which ``--init-from`` would
    ignore without a word: MODEL's width, heads, feed-forward width, dropout, ties, input feeding (a preset brings
    its own), position table, initialisation and variables are kept, and ``--learned-positions`` only rewrites an
    architecture given with the options (surgery)."""
    defaults = {f.name: f.default for f in fields(TrainConfig)} | {"d_ff": 4 * config.d_model}  # d_ff's, resolved
    theirs = {"d_model": base.d_model, "heads": base.heads, "d_ff": base.ff_factor * base.d_model,
              "dropout": base.dropout, "tie_output": base.tie_output, "tie_source": base.tie_source,
              "input_feeding": base.input_feeding, "max_positions": base.max_len, "init": base.init}  # fmt: skip
    if config.preset:
        del theirs["input_feeding"]
    for name, value in theirs.items():
        given = getattr(config, name)
        if given != defaults[name] and given != value:
            flag = f"--{name.replace('_', '-')}"
            shown = flag if isinstance(given, bool) else f"{flag} {given}"
            raise UserError(f"{shown}: --init-from {config.init_from} keeps the model's {name} ({value}); leave "
                            "the option out")  # fmt: skip
    if config.var:
        raise UserError(f"--var {config.var[0]}: --init-from {config.init_from} keeps the model's ADL variables "
                        f"({', '.join(f'{k}={v}' for k, v in base.variables.items()) or 'none'}); leave the option "
                        "out")  # fmt: skip
    if config.learned_positions and not (config.preset or config.encoder or config.decoder):
        raise UserError(f"--learned-positions: --init-from {config.init_from} keeps the model's architecture; give "
                        "it with --encoder/--decoder or --preset (surgery), or leave the option out")  # fmt: skip


def pretrained_digest(init_dir: Path) -> str:
    """The SHA-256 of MODEL's ``config.json`` and best checkpoint: which version of it a run starts from."""
    model_dir = ModelDir(init_dir)
    files = (model_dir.config_file, model_dir.best_weights)
    return hashlib.sha256("".join(file_sha256(path) for path in files).encode()).hexdigest()


def check_same_source(init_dir: Path, model_dir: Path) -> None:
    """Refuse to resume the run in ``model_dir`` when MODEL changed since the run started from it (its digest in
    ``init_from.json``; runs recorded without one are not checked)."""
    path = model_dir / INIT_FROM
    recorded = read_json_object(path).get("sha256") if path.is_file() else None
    if recorded is not None and recorded != pretrained_digest(init_dir):
        raise UserError(
            f"{model_dir} started from another version of {init_dir} (its weights or config.json changed since: "
            f"{INIT_FROM}); choose a new --model directory to start from it as it is now"
        )


# The training options of the model's sizes and settings that --init-from takes from MODEL (check_sizes refuses
# other values): a run's config.json records MODEL's (recorded_options), its "model" entry holds them all.
MODEL_KEPT_OPTIONS = frozenset({"d_model", "heads", "d_ff", "dropout", "tie_output", "tie_source", "input_feeding",
                                "max_positions", "init"})  # fmt: skip


def recorded_options(config: TrainConfig, model: ModelConfig) -> TrainConfig:
    """``config`` with the options of :data:`MODEL_KEPT_OPTIONS` set to what ``model`` (the model ``--init-from``
    starts) trains with, not their defaults: what its ``config.json`` records."""
    return replace(config, d_model=model.d_model, heads=model.heads, d_ff=model.ff_factor * model.d_model,
                   dropout=model.dropout, tie_output=model.tie_output, tie_source=model.tie_source,
                   input_feeding=model.input_feeding, max_positions=model.max_len, init=model.init)  # fmt: skip


def init_model_config(config: TrainConfig, data: DataDir) -> ModelConfig:
    """:func:`pretrained_model_config`, once ``data`` is known to be encoded with MODEL's vocabulary."""
    assert config.init_from is not None
    base = pretrained_model_config(config)
    check_vocabulary(Path(config.init_from), data)
    return base


@torch.no_grad()
def initialise_from(
    model: Seq2Seq, init_dir: Path, model_dir: Path | None, log: Callable[[str], None]
) -> dict[str, Any]:
    """Copy into ``model`` every tensor of ``init_dir``'s best checkpoint whose name and shape match; print (``log``)
    and write (``model_dir``/init_from.json, unless None) which tensors were copied, initialised afresh, or left
    unused, and the digest of the version of MODEL they came from."""
    source, _, _ = ModelDir(init_dir).load_model("best")
    theirs = source.state_dict()
    copied, initialised = [], {}
    for name, tensor in model.state_dict().items():
        found = theirs.get(name)
        if found is not None and found.shape == tensor.shape:
            tensor.copy_(found)
            copied.append(name)
        else:
            initialised[name] = "absent" if found is None else f"shape {list(found.shape)} ≠ {list(tensor.shape)}"
    unused = sorted(set(theirs) - set(copied))
    record = {"from": str(init_dir.resolve()), "sha256": pretrained_digest(init_dir), "checkpoint": "best",
              "copied": copied, "initialised": initialised, "unused": unused}  # fmt: skip
    if model_dir is not None:
        text = json.dumps(record, indent=2) + "\n"
        atomic_write(model_dir / INIT_FROM, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    log(f"init from {init_dir}: copied {len(copied)} tensors, initialised {len(initialised)}, left {len(unused)} "
        f"unused (recorded in {INIT_FROM})")  # fmt: skip
    for name, reason in initialised.items():
        log(f"  initialised {name} ({reason})")
    for name in unused:
        log(f"  unused {name}")
    return record
