"""Run under torchrun or srun by the training tests: train a few updates, then save this rank's parameters."""

import gc
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
# A DDP wrapper (and the gloo group it holds) still alive at interpreter exit can abort this process at random.
assert not [o for o in gc.get_objects() if isinstance(o, torch.nn.parallel.DistributedDataParallel)], "DDP survives"
torch.save({k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}, out / f"rank{trainer.rank}.pt")
