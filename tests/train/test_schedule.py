"""Learning-rate schedules: plateau decay and inverse square root with warm-up."""

from __future__ import annotations

import math

import pytest
import torch

from adlnmt.train.config import TrainConfig
from adlnmt.train.schedule import Schedule


def optimizer() -> torch.optim.Optimizer:
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1.0)


def test_plateau_decays_after_patience_checkpoints_without_improvement() -> None:
    config = TrainConfig(data="d", model="m", lr=2e-4, lr_patience=3, lr_decay=0.7).resolved()
    schedule, opt = Schedule(config), optimizer()
    schedule.apply(opt)
    for improved in (True, False, False):
        schedule.step_checkpoint(opt, improved)
    assert opt.param_groups[0]["lr"] == pytest.approx(2e-4)
    schedule.step_checkpoint(opt, False)  # third checkpoint without improvement
    assert opt.param_groups[0]["lr"] == pytest.approx(1.4e-4)
    for _ in range(2):
        schedule.step_checkpoint(opt, False)
    schedule.step_checkpoint(opt, True)  # improvement resets the count
    for _ in range(2):
        schedule.step_checkpoint(opt, False)
    assert opt.param_groups[0]["lr"] == pytest.approx(1.4e-4)


def plateau_rates(patience: int, valid_ppl: list[float]) -> list[float]:
    """The learning rate after each checkpoint of a run whose validation perplexities are ``valid_ppl`` (improved:
    lower than every earlier one, as the trainer counts)."""
    config = TrainConfig(data="d", model="m", lr=1.0, lr_patience=patience, lr_decay=0.5).resolved()
    schedule, opt = Schedule(config), optimizer()
    best, rates = math.inf, []
    for ppl in valid_ppl:
        schedule.step_checkpoint(opt, ppl < best)
        best = min(best, ppl)
        rates.append(opt.param_groups[0]["lr"])
    return rates


def test_plateau_never_decays_at_an_improving_checkpoint() -> None:
    valid_ppl = [10.0, 9.0, 9.5, 8.0, 8.5, 8.6, 7.0]
    assert plateau_rates(0, valid_ppl) == [1.0, 1.0, 0.5, 0.5, 0.25, 0.125, 0.125]
    assert plateau_rates(1, valid_ppl) == plateau_rates(0, valid_ppl)
    assert plateau_rates(2, valid_ppl) == [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5]
    assert plateau_rates(0, [10.0, 9.0, 8.0, 7.0]) == [1.0] * 4


def test_inverse_sqrt_warms_up_linearly_then_decays() -> None:
    config = TrainConfig(data="d", model="m", lr=1e-3, lr_schedule="inverse-sqrt", warmup=100).resolved()
    schedule, opt = Schedule(config), optimizer()
    rates = {}
    for update in (1, 50, 100, 400):
        schedule.step_update(opt, update)
        rates[update] = opt.param_groups[0]["lr"]
    assert rates[1] == pytest.approx(1e-5)
    assert rates[50] == pytest.approx(5e-4)
    assert rates[100] == pytest.approx(1e-3)
    assert rates[400] == pytest.approx(1e-3 * math.sqrt(100 / 400))
    assert (config.adam_beta2, config.adam_eps) == (0.98, 1e-9)


def test_state_round_trip() -> None:
    config = TrainConfig(data="d", model="m", lr_patience=1).resolved()
    schedule, opt = Schedule(config), optimizer()
    schedule.step_checkpoint(opt, False)
    restored = Schedule(config)
    restored.load_state_dict(schedule.state_dict())
    assert restored.state_dict() == schedule.state_dict()
