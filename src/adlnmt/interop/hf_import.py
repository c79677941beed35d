"""``adlnmt import --from hf-marian DIR --out MODEL``: a Hugging Face MarianMT directory as an adlnmt model directory.

Reads ``config.json`` (checked key by key: :mod:`adlnmt.interop.marian_shape`), the tokenizer (``vocab.json``,
``source.spm``, ``target.spm``: :mod:`adlnmt.interop.marian_vocab`) and the weights (``model.safetensors``, else
``pytorch_model.bin`` loaded with ``weights_only``), never ``transformers``. Every tensor is accounted for: each block
tensor fills its adlnmt tensor, the embeddings and ``final_logits_bias`` are renumbered to adlnmt ids, tied copies and
the (rebuilt, unstored) sinusoid tables must equal what they copy; a tensor left over or missing is an error naming
it. MarianMT cannot emit its pad/start token, so its output bias becomes ``NEVER_PREDICTED`` (Marian's own softmax
has no such class). The model directory is written beside ``--out`` and renamed into place: nothing half-written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from adlnmt.data.data_dir import FORMAT_VERSION, MANIFEST, SPLIT_FILES
from adlnmt.data.vocab import SPECIAL_IDS
from adlnmt.errors import UserError
from adlnmt.interop.marian_shape import MarianArchitecture, flag, marian_adl, marian_links, number, read_architecture
from adlnmt.interop.marian_vocab import (
    NEVER_PREDICTED,
    TARGET_VOCAB,
    MarianVocabulary,
    marian_vocabulary,
    read_vocab_json,
    select_rows,
    side_model,
)
from adlnmt.interop.staging import check_new_directory, write_new_directory
from adlnmt.layers.basic import sinusoid_halves
from adlnmt.model import Seq2Seq
from adlnmt.model_config import ModelConfig
from adlnmt.store import ModelDir, names, new_model_id
from adlnmt.store.atomic import atomic_write, describe, file_sha256, read_json_object

SOURCE = "hf-marian"
TOKENIZER_FILES = ("vocab.json", "source.spm", "target.spm")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
IMPORT_RECORD = "imported"  # config.json's entry: where the model came from and how its tensors were mapped
SPM_FILES = {"src": "spm.src.model", "tgt": "spm.tgt.model"}
WHAT = "an import"  # in messages about --out


@dataclass
class Imported:
    """What an import did: the model, each side's vocabulary (one object for both when shared) and the tensors
    read (name → adlnmt place)."""

    model: Seq2Seq
    vocabularies: dict[str, MarianVocabulary]
    mapping: dict[str, str]

    @property
    def separate(self) -> bool:
        return self.vocabularies["src"] is not self.vocabularies["tgt"]


def read_weights(directory: Path) -> dict[str, Tensor]:
    """The checkpoint's tensors (safetensors preferred; a pickle only through ``weights_only``)."""
    for name in WEIGHT_FILES:
        path = directory / name
        if not path.is_file():
            continue
        try:
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                tensors = load_file(path)
            else:
                tensors = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # safetensors and torch raise several types for damaged files
            raise UserError(f"{path}: {_load_failure(err)}") from None
        if not isinstance(tensors, dict) or not all(isinstance(t, Tensor) for t in tensors.values()):
            raise UserError(f"{path}: malformed (expected a mapping of names to tensors)")
        for key, value in tensors.items():
            if not value.is_floating_point():
                raise UserError(f"{path}: the tensor {key} holds {str(value.dtype).removeprefix('torch.')}, not "
                                "floating-point weights")  # fmt: skip
            if not bool(value.isfinite().all()):
                raise UserError(f"{path}: the tensor {key} holds NaN or infinite values")
        return {key: value.float() for key, value in tensors.items()}
    raise UserError(f"{directory}: no weights ({' or '.join(WEIGHT_FILES)})")


def _load_failure(err: Exception) -> str:
    """Why a weights file did not load: a pickle that names code (refused, never run) or a damaged file. Torch's
    weights_only message advises loading with ``weights_only=False``, which would run that code: not passed on."""
    import re

    text = str(err)
    if not text.startswith("Weights only load failed"):
        return f"damaged ({describe(err)})"
    if found := re.search(r"GLOBAL ([\w.]+)", text):
        return (
            f"refused: it holds Python objects besides tensors ({found.group(1)}), code that unpickling would run "
            "(read with weights_only); save its tensors as model.safetensors from a copy you trust"
        )
    detail = re.search(r"WeightsUnpickler error:\s*(.+?)\s*(?:\n\n|$)", text, re.S)
    return f"damaged (not a PyTorch checkpoint{': ' + detail.group(1) if detail else ''})"


def separate_vocabs(directory: Path) -> bool:
    """Whether the tokenizer has a vocabulary per side (``tokenizer_config.json``'s ``separate_vocabs``, as
    MarianTokenizer reads it: ``target_vocab.json`` is read only then)."""
    path = directory / "tokenizer_config.json"
    return path.is_file() and flag(read_json_object(path), "separate_vocabs", path, False)


def read_tokenizer(directory: Path, config: dict[str, Any], arch: MarianArchitecture
                   ) -> tuple[dict[str, MarianVocabulary], dict[str, bytes]]:  # fmt: skip
    """Each side's vocabulary (one shared, or with ``separate_vocabs`` the source's from ``vocab.json`` and the
    target's from ``target_vocab.json``) and each side's renumbered sentencepiece model."""
    separate = separate_vocabs(directory)
    for name in TOKENIZER_FILES + ((TARGET_VOCAB,) if separate else ()):
        if not (directory / name).is_file():
            needs = ", ".join(TOKENIZER_FILES) + (f" and, with separate_vocabs, {TARGET_VOCAB}" if separate else "")
            raise UserError(f"{directory / name}: missing (a MarianMT tokenizer needs {needs})")
    config_path = directory / "config.json"
    target_key = "vocab_size" if config.get("decoder_vocab_size") is None else "decoder_vocab_size"
    keys = {"src": "vocab_size", "tgt": target_key}
    sizes = {side: number(config, key, config_path, least=4) for side, key in keys.items()}
    if not separate and sizes["src"] != sizes["tgt"]:
        raise UserError(f"{config_path}: decoder_vocab_size {sizes['tgt']} differs from vocab_size {sizes['src']}, "
                        "but the tokenizer has one vocab.json for both sides (tokenizer_config.json has no "
                        "separate_vocabs)")  # fmt: skip
    if separate and arch.shared:
        raise UserError(f"{config_path}: share_encoder_decoder_embeddings is true, but the tokenizer has separate "
                        "vocabularies (separate_vocabs): one embedding table cannot hold two vocabularies")  # fmt: skip
    files = {"src": directory / "source.spm", "tgt": directory / "target.spm"}
    models = {side: path.read_bytes() for side, path in files.items()}
    eos, pad = number(config, "eos_token_id", config_path, default=0), number(config, "pad_token_id", config_path,
                                                                               default=sizes["tgt"] - 1)  # fmt: skip
    if config.get("decoder_start_token_id", pad) != pad:
        raise UserError(f"{config_path}: decoder_start_token_id must be the pad token {pad} (its zero "
                        "embedding starts decoding)")  # fmt: skip
    if separate:
        tables = {"src": directory / "vocab.json", "tgt": directory / TARGET_VOCAB}
        vocabularies = {
            side: marian_vocabulary(
                read_vocab_json(path, sizes[side], keys[side]), {files[side]: models[side]}, eos, pad, path
            )
            for side, path in tables.items()
        }
    else:
        path = directory / "vocab.json"
        by_file = {files[side]: models[side] for side in files}
        shared = marian_vocabulary(read_vocab_json(path, sizes["src"]), by_file, eos, pad, path)
        vocabularies = {"src": shared, "tgt": shared}
    spm_models = {side: side_model(models[side], vocabularies[side].pieces, files[side]) for side in files}
    return vocabularies, spm_models


def model_config(arch: MarianArchitecture, sizes: dict[str, int]) -> ModelConfig:
    encoder, decoder, heads, factor = marian_adl(arch)
    return ModelConfig(
        encoder=encoder,
        decoder=decoder,
        src_vocab_size=sizes["src"],
        tgt_vocab_size=sizes["tgt"],
        d_model=arch.d_model,
        heads=heads,
        dropout=arch.dropout,
        ff_factor=factor,
        max_len=arch.max_positions,
        tie_output=arch.tied,
        tie_source=arch.shared and arch.tied,
    )


class TensorReader:
    """The checkpoint's tensors, each taken once: :meth:`leftover` names those never taken."""

    def __init__(self, tensors: dict[str, Tensor], path: Path) -> None:
        self.tensors = tensors
        self.path = path
        self.taken: set[str] = set()

    def take(self, name: str, shape: tuple[int, ...] | None = None, optional: bool = False) -> Tensor | None:
        if name not in self.tensors:
            if optional:
                return None
            raise UserError(f"{self.path}: the tensor {name} is missing")
        tensor = self.tensors[name]
        if shape is not None and tuple(tensor.shape) != shape:
            raise UserError(f"{self.path}: the tensor {name} has shape {list(tensor.shape)}, the configuration "
                            f"implies {list(shape)}")  # fmt: skip
        self.taken.add(name)
        return tensor

    def copy(self, name: str, reference: Tensor) -> None:
        """A stored duplicate (a tied embedding, a rebuilt table): taken if present, and must equal ``reference``."""
        tensor = self.take(name, tuple(reference.shape), optional=True)
        if tensor is not None and not torch.allclose(tensor, reference, atol=1e-5):
            raise UserError(f"{self.path}: the tensor {name} differs from what it must equal (a tied embedding "
                            "or the sinusoid table): not a MarianMT model as configured")  # fmt: skip

    def leftover(self) -> list[str]:
        return sorted(set(self.tensors) - self.taken)


EMBEDDINGS = {"src": "model.encoder.embed_tokens.weight", "tgt": "model.decoder.embed_tokens.weight"}
SHARED = "model.shared.weight"


def embedding_tables(reader: TensorReader, settings: ModelConfig, shapes: dict[str, tuple[int, int]]
                     ) -> dict[str, Tensor]:  # fmt: skip
    """The source and target embedding tables in Marian ids (``shapes``: per side). ``transformers`` 5 ties
    ``shared``, both sides' ``embed_tokens`` and ``lm_head`` when ``tie_word_embeddings`` and
    ``share_encoder_decoder_embeddings`` (then only ``shared`` is stored; older versions store equal copies) and
    unties all four otherwise (``shared``, when shared, is then stored but read by nothing; without
    ``share_encoder_decoder_embeddings`` there is none)."""
    shared = reader.take(SHARED, shapes["src"], optional=True)
    if settings.tie_source:
        table = shared if shared is not None else reader.take(EMBEDDINGS["src"], shapes["src"])
        for name in EMBEDDINGS.values():
            reader.copy(name, table)
        return {"src": table, "tgt": table}
    tables = {}
    for side, name in EMBEDDINGS.items():
        stored = reader.take(name, shapes[side], optional=True)
        if stored is None and (shared is None or shapes[side] != shapes["src"]):
            reader.take(name, shapes[side])  # the error naming it
        tables[side] = stored if stored is not None else shared
    return tables


def rows(table: Tensor, vocabulary: MarianVocabulary) -> Tensor:
    """Marian ``table`` [V, …] renumbered to adlnmt ids [V', …] (a zero row where no Marian row belongs)."""
    return select_rows(table, vocabulary.rows)


@torch.no_grad()
def convert(directory: Path) -> tuple[Imported, dict[str, bytes], ModelConfig]:
    """The adlnmt model of the MarianMT checkpoint in ``directory``, its spm models per side and its configuration."""
    config_path = directory / "config.json"
    config = read_json_object(config_path)
    arch = read_architecture(config, str(config_path))
    vocabularies, spm_models = read_tokenizer(directory, config, arch)
    weights = read_weights(directory)
    path = next(directory / name for name in WEIGHT_FILES if (directory / name).is_file())
    reader = TensorReader(weights, path)
    settings = model_config(arch, {side: vocabulary.size for side, vocabulary in vocabularies.items()})
    model = Seq2Seq(settings).eval()
    mapping: dict[str, str] = {}
    names_of = {id(p): n for n, p in model.named_parameters()}
    for name, view in marian_links(model).items():
        view.copy_(reader.take(name, tuple(view.shape)))
        base = view._base if view._base is not None else view
        mapping[name] = names_of.get(id(base), "?")
    d = arch.d_model
    shapes = {side: (vocabulary.marian_size, d) for side, vocabulary in vocabularies.items()}
    size, target = shapes["tgt"][0], vocabularies["tgt"]
    tables = embedding_tables(reader, settings, shapes)
    model.src_embed.weight.copy_(rows(tables["src"], vocabularies["src"]))
    model.tgt_embed.weight.copy_(rows(tables["tgt"], target))
    mapping |= {EMBEDDINGS["src"]: "src_embed.weight", EMBEDDINGS["tgt"]: "tgt_embed.weight"}
    if settings.tie_output:
        reader.copy("lm_head.weight", tables["tgt"])
    else:
        model.output.weight.copy_(rows(reader.take("lm_head.weight", (size, d)), target))
        mapping["lm_head.weight"] = "output.weight"
    bias = reader.take("final_logits_bias", (1, size), optional=True)
    model.output.bias.copy_(rows(torch.zeros(size) if bias is None else bias[0], target))
    model.output.bias[torch.tensor(target.never)] = NEVER_PREDICTED
    mapping["final_logits_bias"] = "output.bias" if bias is not None else "output.bias (absent: zeros, as MarianMT)"
    for side in ("encoder", "decoder"):
        name = f"model.{side}.embed_positions.weight"
        if name in weights:
            table = sinusoid_halves(torch.arange(weights[name].size(0)), d)
            reader.copy(name, table)
            mapping[name] = f"{side} pos(layout=halves) (rebuilt, equal)"
    leftover = reader.leftover()
    if leftover:
        raise UserError(f"{path}: {len(leftover)} tensors have no place in a MarianMT model as configured: "
                        f"{', '.join(leftover[:5])}{' …' if len(leftover) > 5 else ''}")  # fmt: skip
    return Imported(model, vocabularies, mapping), spm_models, settings


def vocabulary_manifest(vocabularies: dict[str, MarianVocabulary], joint: bool, max_len: int) -> dict[str, Any]:
    """The ``vocab/manifest.json`` of an imported model (a data manifest without splits; ``joint``: one
    sentencepiece model for both sides)."""
    return {
        "format_version": FORMAT_VERSION,
        "joint": joint,
        "model_type": "marian",
        "source_markers": False,
        "special_ids": dict(SPECIAL_IDS),
        "src_vocab_size": vocabularies["src"].size,
        "tgt_vocab_size": vocabularies["tgt"].size,
        "spm": {side: SPM_FILES["src"] if joint else SPM_FILES[side] for side in SPM_FILES},
        "options": {"max_len": max_len, "source_markers": False},
        SPLIT_FILES[FORMAT_VERSION]: {},
        "splits": {},
    }


def write_model_dir(directory: Path, imported: Imported, spm_models: dict[str, bytes], settings: ModelConfig,
                    record: dict[str, Any]) -> None:  # fmt: skip
    """An adlnmt model directory in ``directory``: vocab/, best.safetensors and config.json."""
    from safetensors.torch import save_model

    files = ModelDir(directory)
    joint = spm_models["src"] == spm_models["tgt"]
    manifest = vocabulary_manifest(imported.vocabularies, joint, settings.max_len - 1)
    for side in ("src", "tgt") if not joint else ("src",):
        data = spm_models[side]
        atomic_write(files.vocab_dir / manifest["spm"][side], lambda tmp, data=data: tmp.write_bytes(data))
    text = json.dumps(manifest, indent=2) + "\n"
    atomic_write(files.vocab_dir / MANIFEST, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    hashes = {path.name: file_sha256(path) for path in sorted(files.vocab_dir.iterdir())}
    model_id = new_model_id()
    metadata = {names.WEIGHTS_MODEL_ID: model_id}
    atomic_write(files.best_weights, lambda tmp: save_model(imported.model, str(tmp), metadata=metadata))
    model = imported.model
    # the training options that describe this model (commands that read others fill in their defaults)
    train = {key: getattr(settings, key) for key in ("encoder", "decoder", "d_model", "heads", "dropout")}
    files.write_config({
        "train": train,
        "model": settings.to_dict(),
        "data_digest": None,
        names.VOCAB_HASHES: hashes,
        names.MODEL_ID: model_id,
        "canonical": {"encoder": model.canonical_encoder, "decoder": model.canonical_decoder},
        "parameters": model.parameter_count(),
        "version": 1,
        "changed_settings": [],
        IMPORT_RECORD: record,
    })  # fmt: skip


def import_marian(source: str | Path, out: str | Path) -> Imported:
    """Import the MarianMT directory ``source`` as the new model directory ``out`` (refused when it exists)."""
    source, out = Path(source), Path(out)
    check_new_directory(out, WHAT, source)
    if not source.is_dir():
        raise UserError(f"{source}: not a directory (expected a MarianMT model: config.json, weights, tokenizer)")
    imported, spm_models, settings = convert(source)
    vocabularies = imported.vocabularies
    record = {
        "from": SOURCE,
        "path": str(source.resolve()),
        "files": {p.name: file_sha256(p) for p in sorted(source.iterdir()) if p.is_file()},
        "tensors": imported.mapping,
        "separate_vocabs": imported.separate,
        "pieces_missing_from_vocab_json": vocabularies["src"].missing,
    }
    if imported.separate:
        record[f"pieces_missing_from_{TARGET_VOCAB.replace('.', '_')}"] = vocabularies["tgt"].missing
    write_new_directory(out, lambda directory: write_model_dir(directory, imported, spm_models, settings, record),
                        WHAT)  # fmt: skip
    return imported
