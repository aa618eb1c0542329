"""A grounding model in the perception ablation's loop: a tiny OWL-ViT (transformers' open-vocabulary detector)
with random weights, written as a local checkpoint directory for the ``hf-detector`` grounding backend.

No trained detector weights can be fetched where this project runs, so the ablation's ``detector_model`` setting
runs the real detector code path -- processor, model, post-processing, phrase -> name assignment -- on a model
that has learned nothing. Its success rate is what perception costs with an untrained detector in the loop, not
what a trained OWL-ViT would give; the report says so. The checkpoint is deterministic (seeded), so runs repeat.
"""

from __future__ import annotations

from pathlib import Path

#: The words the tokenizer is built from: the phrases the detector is asked for in the ablation's worlds.
VOCABULARY = ("apple", "blue block", "gelatin box", "tomato soup can", "baseball", "blue cup", "orange", "pear",
              "red block", "sponge", "drawer", "handle", "cabinet", "white bowl", "table")


def build_tiny_owlvit(path: Path, seed: int = 0) -> Path:
    """Write the checkpoint (config, weights, processor) to ``path`` unless it is already there; returns ``path``."""
    path = Path(path)
    if (path / "config.json").is_file() and (path / "preprocessor_config.json").is_file():
        return path
    import torch
    from transformers import (
        OwlViTConfig,
        OwlViTForObjectDetection,
        OwlViTProcessor,
        PreTrainedTokenizerFast,
    )
    from transformers.models.owlvit.image_processing_pil_owlvit import (
        OwlViTImageProcessorPil,
    )

    from tasks.train.tiny import _bpe

    config = OwlViTConfig(
        text_config={"vocab_size": 320, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "max_position_embeddings": 16, "bos_token_id": 1,
                     "eos_token_id": 2, "pad_token_id": 0},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "image_size": 64, "patch_size": 16}, projection_dim=32)
    torch.manual_seed(seed)
    model = OwlViTForObjectDetection(config).eval()
    with torch.no_grad():  # random box weights saturate the sigmoid into zero-size boxes: start from the priors
        model.box_head.dense2.weight.mul_(0.01)
        model.box_head.dense2.bias.zero_()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_bpe(list(VOCABULARY), 320, ["<pad>", "<s>", "</s>", "<unk>"]),
                                        bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
                                        model_max_length=16)
    image = OwlViTImageProcessorPil(size={"height": 64, "width": 64}, crop_size={"height": 64, "width": 64})
    tmp = path.with_name(path.name + ".partial")
    model.save_pretrained(tmp)
    OwlViTProcessor(image_processor=image, tokenizer=tokenizer).save_pretrained(tmp)
    if not path.exists():
        tmp.replace(path)
    return path
