"""Training configuration: one dataclass is the source of the CLI flags, the YAML keys and the
resolved ``config.json`` stored in the model directory. Precedence: defaults < YAML < CLI flags.

Each numeric option declares its range (``bounds``, :mod:`adlnmt.bounds`): flags, YAML files and grids are checked
against it alike, and no float option takes nan or inf."""

from __future__ import annotations

import argparse
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from adlnmt.adl.syntax import rename_layers, to_text
from adlnmt.bounds import FRACTION, POSITIVE, SEED, Bounds, at_least
from adlnmt.data.vocab import PAD
from adlnmt.errors import UserError
from adlnmt.flags import GivenOnce, add_flags, bounds_of, flag_of, option, out_of_bounds
from adlnmt.model_config import INIT_SCHEMES, ModelConfig
from adlnmt.presets import get_preset
from adlnmt.store.atomic import path_flag
from adlnmt.store.model_dir import EARLY_STOP_METRICS
from adlnmt.yamltext import read_yaml_file


@dataclass
class TrainConfig:
    """The options of ``adlnmt train``: one field per flag and YAML key (``d_model`` is ``--d-model``), with its
    default, bounds and help."""

    data: str = option(None, "prepared data directory (adlnmt prepare)", parse=path_flag)
    model: str = option(None, "model directory (created; re-running the same command resumes)", parse=path_flag)
    encoder: str | None = option(None, "encoder ADL chain")
    decoder: str | None = option(None, "decoder ADL chain")
    preset: str | None = option(None, "a named architecture instead of --encoder/--decoder")
    d_model: int = option(512, "model width", bounds=at_least(1))
    heads: int = option(8, "default attention heads", bounds=at_least(1))
    d_ff: int | None = option(
        None, "feed-forward width ($FF_NUM_HIDDEN, ffl factor = d_ff/d_model; default 4·d)", bounds=at_least(1)
    )
    dropout: float = option(0.1, "default dropout rate", bounds=FRACTION)
    label_smoothing: float = option(0.1, "label smoothing", bounds=FRACTION)
    var: list[str] = option(None, "ADL variable NAME=VALUE (repeatable)", action="append", metavar="NAME=VALUE")  # noqa: RUF009
    tie_output: bool = option(False, "tie target embedding and output projection", switch=True)
    tie_source: bool = option(False, "tie source and target embeddings (joint vocabulary)", switch=True)
    input_feeding: bool = option(False, "RNMT input feeding z0_t = [z^L_(t-1); E y_t]", switch=True)
    learned_positions: bool = option(False, "learned positional embeddings: every pos becomes learn_pos", switch=True)
    max_positions: int = option(1024, "table size of learned positional embeddings", bounds=at_least(1))
    init_from: str | None = option(
        None,
        "start from this model directory's weights and vocabulary (data prepared with --vocab-from it); with "
        "--encoder/--decoder or --preset a changed architecture copies the tensors whose path and shape match",
        parse=path_flag,
    )
    init: str = option(
        "torch",
        "weight initialisation: torch (nn.Linear defaults) or fairseq (fairseq 0.12's attention projections)",
        choices=INIT_SCHEMES,
    )
    batch_tokens: int = option(4096, "padded tokens per batch (max(src, tgt) length × sentences)", bounds=at_least(1))
    batching: str = option(
        "length",
        "length: batches of sentences of similar lengths (least padding); mixed: sentences in random order, so "
        "each batch mixes lengths (for batch norm, whose statistics otherwise differ by length between training "
        "and evaluation: experiments/analysis/README.md)",
        choices=("length", "mixed"),
    )
    accumulate: int = option(1, "batches per update (gradient accumulation)", bounds=at_least(1))
    shuffle_buffer: int = option(
        1_000_000,
        "training pairs shuffled and batched together (a window of the epoch; start-up and memory grow with it, "
        "not with the corpus)",
        bounds=at_least(1),
    )
    temperature: float = option(
        1.0,
        "corpus sampling temperature T: corpus i's share ∝ (weight·pairs)^(1/T); 1 = proportional, large = uniform "
        "(data of several corpora: adlnmt prepare --train NAME=SRC,TGT:WEIGHT)",
        bounds=Bounds(low=0, low_open=True),
    )
    lr: float = option(2e-4, "learning rate (peak rate with inverse-sqrt)", bounds=at_least(0))
    lr_schedule: str = option(
        "plateau",
        "plateau: ×lr_decay when the validation score of --early-stop-metric stalls; inverse-sqrt: linear warm-up then "
        "1/√step",
        choices=("plateau", "inverse-sqrt"),
    )
    warmup: int = option(4000, "warm-up updates (inverse-sqrt)", bounds=at_least(0))
    lr_decay: float = option(
        0.7, "plateau: factor applied to the learning rate", bounds=Bounds(low=0, high=1, low_open=True)
    )
    lr_patience: int = option(
        8,
        "plateau: decay at this many consecutive checkpoints without improvement (0 as 1: at each such checkpoint)",
        bounds=at_least(0),
    )
    adam_beta1: float = option(0.9, "Adam β1", bounds=FRACTION)
    adam_beta2: float | None = option(None, "Adam β2 (default 0.999; 0.98 with inverse-sqrt)", bounds=FRACTION)
    adam_eps: float | None = option(None, "Adam ε (default 1e-8; 1e-9 with inverse-sqrt)", bounds=POSITIVE)
    weight_decay: float = option(0.0, "AdamW weight decay", bounds=at_least(0))
    clip_norm: float = option(1.0, "clip the gradient norm to this (0 = off)", bounds=at_least(0))
    max_updates: int = option(0, "stop after this many updates (0 = no limit)", bounds=at_least(0))
    max_epochs: int = option(0, "stop after this many epochs (0 = no limit)", bounds=at_least(0))
    max_minutes: float = option(0.0, "stop after this many minutes of training (0 = no limit)", bounds=at_least(0))
    checkpoint_interval: int = option(1000, "updates between checkpoints (validation, saving)", bounds=at_least(1))
    keep_last: int = option(5, "newest checkpoints kept (for adlnmt average --last N)", bounds=at_least(1))
    keep_best: int = option(
        0, "best checkpoints kept besides (for adlnmt average --best N; the ADL code uses 8)", bounds=at_least(0)
    )
    patience: int = option(16, "stop after this many checkpoints without improvement (0 = never)", bounds=at_least(0))
    early_stop_metric: str = option(
        "ppl", "metric for the best model, early stopping, --keep-best and average --best", choices=EARLY_STOP_METRICS
    )
    valid_bleu: bool = option(
        True, "greedy-decode the validation set at checkpoints for BLEU", switch=True, negatable=True
    )
    seed: int = option(1, "random seed (initialisation, dropout, batch order)", bounds=SEED)
    device: str = option("auto", "auto, cpu, cuda or cuda:N")
    precision: str = option("fp32", "fp32, or bf16/fp16 autocast (fp16: CUDA only)", choices=("fp32", "bf16", "fp16"))
    threads: int = option(0, "CPU threads for torch (0 = torch's default)", bounds=at_least(0))
    deterministic: bool = option(
        False,
        "deterministic CUDA kernels (slower): reruns and resumes on a GPU give bit-identical weights",
        switch=True,
    )
    compile: bool = option(
        False,
        "train through torch.compile(model, dynamic=True): fused kernels, the same arithmetic class (fp32 stays fp32, "
        "autocast stays autocast), not bit-identical to eager; validation and decoding stay eager",
        switch=True,
    )
    on_nan: str = option("skip", "non-finite loss: skip the update or stop", choices=("skip", "stop"))
    progress: bool = option(True, "show a progress bar (when stderr is a terminal)", switch=True, negatable=True)
    log_interval: int = option(
        100,
        "updates between progress lines on stderr, terminal or not: loss, lr, gradient norm, tokens/s, ETA (0 = none)",
        bounds=at_least(0),
    )
    tensorboard: str = option(
        "auto",
        "TensorBoard event folder: auto (MODEL/tensorboard when the package is installed), off, or a folder",
        parse=path_flag,
    )

    def resolved(self) -> TrainConfig:
        """Schedule-dependent defaults filled in and values checked."""
        inverse = self.lr_schedule == "inverse-sqrt"
        beta2 = self.adam_beta2 if self.adam_beta2 is not None else (0.98 if inverse else 0.999)
        eps = self.adam_eps if self.adam_eps is not None else (1e-9 if inverse else 1e-8)
        d_ff = self.d_ff if self.d_ff is not None else 4 * self.d_model
        if problems := out_of_bounds(self):
            raise UserError(problems[0])
        if d_ff % self.d_model:
            raise UserError(f"--d-ff ({d_ff}) must be a multiple of --d-model ({self.d_model}) for ffl")
        if self.early_stop_metric == "bleu" and not self.valid_bleu:
            raise UserError("--early-stop-metric bleu needs the validation BLEU that --no-valid-bleu switches off")
        return TrainConfig(
            **{**asdict(self), "adam_beta2": beta2, "adam_eps": eps, "d_ff": d_ff, "var": list(self.var or [])}
        )

    def model_config(self, src_vocab_size: int, tgt_vocab_size: int) -> ModelConfig:
        """The model these options describe: ADL from --preset or --encoder/--decoder, $FF_NUM_HIDDEN = d_ff and
        $NUM_HIDDEN = d_model unless --var sets them."""
        if self.preset:
            if self.encoder or self.decoder:
                raise UserError("give either --preset or --encoder/--decoder, not both")
            preset = get_preset(self.preset)
            encoder, decoder = preset.encoder, preset.decoder
        elif self.encoder and self.decoder:
            encoder, decoder = self.encoder, self.decoder
        else:
            raise UserError("give --encoder and --decoder ADL chains, or --preset NAME")
        if self.learned_positions:
            from adlnmt.layers.builder import prepare  # the layer registry (imports PyTorch)

            encoder, decoder = (
                to_text(rename_layers(prepare(text)[0], {"pos": "learn_pos"})) for text in (encoder, decoder)
            )
        variables = {"FF_NUM_HIDDEN": str(self.d_ff), "NUM_HIDDEN": str(self.d_model)}
        used: set[str] | None = None
        given: dict[str, str] = {}  # name → its --var item
        for item in self.var or []:
            name, sep, value = item.partition("=")
            if not sep:
                raise UserError(f"--var expects NAME=VALUE, got {item!r}")
            name = name.strip().lstrip("$")
            if name in given:  # the last would win in silence
                raise UserError(f"--var {name} given twice ({given[name]}, then {item}); give each variable once")
            given[name] = item
            if used is None:
                used = _variables_used(encoder, decoder)
            if name not in variables and name not in used:  # a typo or a variable of another architecture
                raise UserError(f"--var {item}: the architecture uses no ${name} (its variables: "
                                f"{', '.join(f'${n}' for n in sorted(used)) or 'none'})")  # fmt: skip
            variables[name] = value.strip()
        return ModelConfig(
            encoder=encoder,
            decoder=decoder,
            src_vocab_size=src_vocab_size,
            tgt_vocab_size=tgt_vocab_size,
            d_model=self.d_model,
            heads=self.heads,
            dropout=self.dropout,
            ff_factor=(self.d_ff or 4 * self.d_model) // self.d_model,
            max_len=self.max_positions,
            variables=variables,
            tie_output=self.tie_output,
            tie_source=self.tie_source,
            input_feeding=self.input_feeding,
            pad_id=PAD,
            init=self.init,
        )


def _variables_used(encoder: str, decoder: str) -> set[str]:
    """The ``$NAME`` s of the two ADL chains (an ADL error is left to the model's build, which locates it)."""
    from adlnmt.adl.errors import ADLError
    from adlnmt.adl.parser import parse, variable_names

    used: set[str] = set()
    for text in (encoder, decoder):
        try:
            used |= variable_names(parse(text))
        except ADLError:
            continue
    return used


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig field (``--d-model`` for ``d_model``); defaults stay unset so that
    YAML values can be told apart from flags."""
    parser.add_argument(
        "--config",
        type=path_flag,
        action=GivenOnce,
        help="YAML file of options (keys as the flags, - or _); flags override it",
    )
    add_flags(parser, TrainConfig, unset=True)


def from_arguments(args: argparse.Namespace) -> TrainConfig:
    """The options of ``--config`` (a YAML file) overridden by the flags given; an error about options the file set
    says so (it names them as flags)."""
    values: dict[str, Any] = {}
    config = Path(args.config) if getattr(args, "config", None) else None
    if config is not None:
        values.update(load_yaml(config))
    from_file = set(values)
    for f in fields(TrainConfig):
        given = getattr(args, f.name, None)
        if given is not None:
            values[f.name] = given
            from_file.discard(f.name)
    try:
        return build_config(values)
    except UserError as err:
        flags = sorted(flag_of(f) for f in fields(TrainConfig) if f.name in from_file)
        named = [flag for flag in flags if re.search(rf"--(no-)?{flag[2:]}(?![\w-])", str(err))]
        if not named:
            raise
        raise UserError(f"{err} ({', '.join(named)}: set in {config})") from None


PRESET_SIZES = ("d_model", "heads", "d_ff")  # a preset's options that --init-from leaves to the pretrained model


def preset_options(name: str, pretrained: bool) -> dict[str, Any]:
    """The training options of preset ``name``; with ``--init-from`` (``pretrained``) without its sizes: surgery
    takes the preset's architecture and keeps the pretrained model's width, heads and feed-forward width."""
    options = get_preset(name).options
    return {k: v for k, v in options.items() if k not in PRESET_SIZES} if pretrained else dict(options)


def build_config(values: dict[str, Any]) -> TrainConfig:
    """Precedence: TrainConfig defaults < the preset's options < ``values`` (YAML, then flags)."""
    if values.get("preset"):
        values = {**preset_options(values["preset"], bool(values.get("init_from"))), **values}
    return TrainConfig(**values).resolved()


def load_yaml(path: Path) -> dict[str, Any]:
    """The options of a YAML config file, each typed and within its range, or a UserError naming the file."""
    if path.is_dir():
        raise UserError(f"{path}: a directory, not a config file (a YAML file of option: value)")
    if not path.is_file():
        raise UserError(f"{path}: config file not found")
    raw = read_yaml_file(path) or {}
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected a mapping of option: value")
    known = {f.name: f for f in fields(TrainConfig)}
    values, spelled = {}, {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise UserError(f"{path}: unknown option '{key}'")
        if name in spelled:  # d_model and d-model: one of the two values would silently win
            raise UserError(f"{path}: '{key}' and '{spelled[name]}' are one option, given twice")
        spelled[name] = key
        values[name] = _typed(path, key, value, known[name])
    return values


def _typed(path: Path, key: str, value: Any, option: Any) -> Any:
    """A YAML value as its option's type: ``true``/``false`` in any case (also quoted) for switches, numbers (YAML
    reads ``1e-3`` as a string), text, and ``var`` as a list of NAME=VALUE or a mapping; else a located error."""
    annotation = str(option.type).split(" ")[0]
    if value is None and option.default is None:
        return None
    convert = {"bool": _switch, "int": _integer, "float": _float, "list[str]": _assignments}.get(annotation, _text)
    try:
        typed = convert(value)
    except (TypeError, ValueError) as err:
        hint = ""
        if isinstance(value, bool) and convert is _text:  # tensorboard: off is False in YAML
            words = "on/yes/true" if value else "off/no/false"
            hint = f" (YAML reads an unquoted {words} as {str(value).lower()}: quote it, e.g. 'off')"
        raise UserError(f"{path}: option '{key}' expects {err}, got {value!r}{hint}") from None
    if option.metadata.get("parse") is path_flag:
        try:
            path_flag(typed)
        except argparse.ArgumentTypeError as err:  # an empty folder name would mean the option left out
            raise UserError(f"{path}: option '{key}': {err}") from None
    choices = option.metadata.get("choices")
    if choices and typed not in choices:
        raise UserError(f"{path}: option '{key}' expects one of {', '.join(choices)}, got {value!r}")
    bounds = bounds_of(option)
    if bounds is not None and typed is not None and not bounds.holds(typed):
        raise UserError(f"{path}: option '{key}' {bounds.refusal(typed, repr(value))}")
    return typed


def _switch(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("true or false")


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError("an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("an integer")
    try:
        return int(value)
    except ValueError:
        raise ValueError("an integer") from None


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError("a number")
    try:
        return float(value)
    except ValueError:
        raise ValueError("a number") from None


def _text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError("a text value")
    return str(value)


def _assignments(value: Any) -> list[str]:
    """``var``: a mapping NAME: VALUE or a list of NAME=VALUE (scalars) as a list of NAME=VALUE."""
    items = list(value.values()) if isinstance(value, dict) else value
    if not isinstance(items, list) or any(isinstance(item, dict | list) for item in items):
        raise TypeError("a mapping NAME: VALUE or a list of NAME=VALUE")
    if isinstance(value, dict):
        return [f"{name}={item}" for name, item in value.items()]
    return [str(item) for item in value]
