"""Test-wide settings: one intra-op thread (tiny tensors; avoids 2-thread stalls on busy CI cores)."""

import torch

torch.set_num_threads(1)
