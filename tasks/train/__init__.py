"""Fine-tuning the eight MuEP baselines (docs/training.md).

``registry`` the baselines and ``load_for_inference``; ``families`` architectures (build, load, save); ``tiny``
random tiny configurations and local tokenizers; ``data`` SFT reader, prompts, label masking, images; ``adapters``
LLaMA-Adapter-v2 and MiniGPT-4; ``models`` 4-bit, fine-tuning methods, trainable sets, adapter files; ``build``
assembling a baseline; ``pipeline`` checks before compute; ``session`` one training run; ``trainer`` the loop,
resume, MLflow; ``checkpoints``; ``policy`` the trained model as an agent's policy.
"""
