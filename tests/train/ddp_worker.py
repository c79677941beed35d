"""Run under torchrun by test_ddp.py: train a few updates, then save this rank's parameters."""

import sys
from pathlib import Path

import torch

from adlnmt.cli import build_parser
from adlnmt.train.config import from_arguments
from adlnmt.train.trainer import Trainer

out = Path(sys.argv[1])
args = build_parser().parse_args(sys.argv[2:])
trainer = Trainer(from_arguments(args))
trainer.train()
torch.save({k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}, out / f"rank{trainer.rank}.pt")
