"""Training throughput and peak GPU memory of the eight baselines from their real checkpoints, on a CUDA machine.

    python bench/train_gpu.py                                   # all eight, full profile, 20 steps, batch 4, 512 tokens
    python bench/train_gpu.py --baselines llama2-7b llava --steps 50 --batch-size 8
    python bench/train_gpu.py --profile tiny                    # the CUDA code path with the tiny models (no download)

Needs a CUDA GPU and the checkpoints: the Hugging Face hub (LLaMA-2 is gated: ``huggingface-cli login`` with an
account that accepted Meta's licence) or a local cache (``HF_HOME``; ``HF_HUB_OFFLINE=1`` to forbid downloads).
Each baseline runs in a fresh process, built exactly as the training flow builds it (Q-LoRA models in 4-bit NF4
with bf16 compute -- fp16 on GPUs without bf16 such as the paper's V100s --, LMMs in bf16 with trainable parts in
fp32, accelerate's mixed precision), and trains ``--steps`` steps on the SFT export; the first step is a warm-up.
``peak MiB`` is ``torch.cuda.max_memory_allocated`` over the training steps (the weights included), ``load s`` the
time to load (and quantise) the checkpoint. A baseline that fails (no access, out of memory) gets an error row and
the others go on. The same table as ``bench/train.py``; see docs/training.md for measured numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train import main  # noqa: E402  (bench/train.py: the measuring code and the table)

#: Defaults for a 7B model on one GPU (the CPU bench's are for the tiny models).
GPU_DEFAULTS = {"--steps": "20", "--seq-len": "512", "--batch-size": "4"}


def gpu_main(argv: list[str] | None = None) -> list[dict]:
    import torch

    if not torch.cuda.is_available():
        sys.exit("bench/train_gpu.py needs a CUDA GPU (torch.cuda.is_available() is False here); "
                 "bench/train.py measures the tiny profile on CPU.")
    argv = list(sys.argv[1:] if argv is None else argv)
    for flag, value in GPU_DEFAULTS.items():
        if flag not in argv:
            argv += [flag, value]
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    return main(argv, profile="full", device="cuda", description=__doc__)


if __name__ == "__main__":
    gpu_main()
