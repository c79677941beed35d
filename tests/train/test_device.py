"""fp32 means IEEE fp32 in every kernel: PyTorch's default lets cuDNN's convolutions and RNNs use TF32 on a GPU."""

from __future__ import annotations

import subprocess
import sys


def test_fp32_training_turns_tf32_off_everywhere_and_says_so() -> None:
    # A fresh interpreter: the setting is process-wide, and PyTorch starts with TF32 allowed in cuDNN.
    script = (
        "import torch\n"
        "from adlnmt.train.device import precision_setup, tf32_allowed\n"
        "before = tf32_allowed()\n"
        "precision_setup('fp32', torch.device('cpu'))\n"
        "print(before['cudnn'], sorted(set(tf32_allowed().values())))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "[False]"]
