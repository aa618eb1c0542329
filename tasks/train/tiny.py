"""The tiny profile: every baseline's architecture with random weights, a locally trained tokenizer and a PIL image
processor -- no download, a few MB, trains on CPU in seconds.

The configurations use the *same classes* as the real checkpoints (``LlamaForCausalLM``, ``OPTForCausalLM``,
``BloomForCausalLM``, ``Blip2ForConditionalGeneration``, ``InstructBlipForConditionalGeneration``,
``LlavaForConditionalGeneration``, and our MiniGPT-4 / LLaMA-Adapter-v2 assemblies), only narrower and shallower.
Language models are 64 wide with 4 heads of 16, so every linear layer of their blocks is >= 64 wide and
bitsandbytes' 4-bit NF4 kernels run on CPU (they fail below 64).

The tokenizer is a byte-level BPE trained on the training records plus a fixed seed corpus: byte-level means no
unknown tokens and an exact decode, so a generated action reads back character for character.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Special tokens of every tiny tokenizer. ``<image>`` is the image placeholder of BLIP-2, InstructBLIP, MiniGPT-4
#: and LLaVA prompts (one id, repeated once per visual token).
PAD, BOS, EOS, UNK, IMAGE = "<pad>", "<s>", "</s>", "<unk>", "<image>"
SPECIALS = [PAD, BOS, EOS, UNK, IMAGE]
TOKENIZER_VOCAB = 640
QFORMER_VOCAB = 320

TEXT_WIDTH = 64        # hidden size of every tiny language model (>= 64: 4-bit kernels need it)
VISION_WIDTH = 32      # hidden size of the tiny vision towers and Q-Formers
IMAGE_SIZE = 32        # pixels; 8-pixel patches -> 16 patches
PATCH = 8
QUERY_TOKENS = 4       # BLIP-2 / InstructBLIP / MiniGPT-4 learned queries
MAX_POSITIONS = 2048

#: A fixed corpus so that the tokenizer has the words of ALFWorld's commands and of the templates even when trained
#: on a handful of records (it is byte-level: anything else still tokenises, in more pieces).
SEED_CORPUS = [
    "go to", "take", "from", "move", "to", "put", "in", "on", "in/on", "open", "close", "toggle", "heat", "cool",
    "clean", "slice", "with", "use", "look", "inventory", "examine", "Task:", "Observation:", "Action:",
    "Next action:", "You arrive at", "You see", "Nothing happens.", "Question:", "Answer:", "USER:", "ASSISTANT:",
    "### Instruction:", "### Response:", "###Human:", "###Assistant:", "[INST]", "[/INST]", "<Img>", "</Img>",
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.",
    "Give the following image: <Img>ImageContent</Img>. You will be able to see the image once I provide it to you. "
    "Please answer my questions.",
] + [str(n) for n in range(20)]


def _bpe(corpus: Iterable[str], vocab_size: int, specials: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(SEED_CORPUS) + list(corpus), trainer=trainer)
    return tok


def build_tokenizer(corpus: Iterable[str], vocab_size: int = TOKENIZER_VOCAB):
    """A causal-LM tokenizer (BOS/EOS/PAD, ``<image>``) trained on ``corpus`` -- deterministic for a given corpus."""
    from transformers import PreTrainedTokenizerFast

    tok = _bpe(corpus, vocab_size, SPECIALS)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK,
                                   additional_special_tokens=[IMAGE], padding_side="right")


def build_qformer_tokenizer(corpus: Iterable[str], vocab_size: int = QFORMER_VOCAB):
    """InstructBLIP's second tokenizer (BERT-style ``[CLS] text [SEP]`` for the Q-Former's instruction input)."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
    tok = _bpe(corpus, vocab_size, specials)
    cls_sep = [("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))]
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=cls_sep)
    return PreTrainedTokenizerFast(tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                                  unk_token="[UNK]", padding_side="right")


def _image_processor(model: str, name: str):
    """The PIL-backed processor class (no torchvision needed) where this transformers has one, else the plain one."""
    import importlib

    try:
        return getattr(importlib.import_module(f"transformers.models.{model}.image_processing_pil_{model}"),
                       f"{name}Pil")
    except (ImportError, AttributeError):
        return getattr(importlib.import_module("transformers"), name)


def blip_image_processor():
    return _image_processor("blip", "BlipImageProcessor")(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})


def clip_image_processor():
    return _image_processor("clip", "CLIPImageProcessor")(size={"shortest_edge": IMAGE_SIZE},
                                                          crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})


# --------------------------------------------------------------------------------------------------------------------
# Configurations (``tok`` supplies the vocabulary size and the special ids)


def _ids(tok) -> dict:
    return {"vocab_size": len(tok), "pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.eos_token_id}


def llama_config(tok):
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=TEXT_WIDTH, intermediate_size=2 * TEXT_WIDTH, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=MAX_POSITIONS,
                       tie_word_embeddings=False, **_ids(tok))


def opt_config(tok):
    from transformers import OPTConfig

    return OPTConfig(hidden_size=TEXT_WIDTH, ffn_dim=2 * TEXT_WIDTH, num_hidden_layers=2, num_attention_heads=4,
                     word_embed_proj_dim=TEXT_WIDTH, max_position_embeddings=MAX_POSITIONS, dropout=0.0,
                     attention_dropout=0.0, **_ids(tok))


def bloom_config(tok):
    from transformers import BloomConfig

    return BloomConfig(hidden_size=TEXT_WIDTH, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0,
                       **_ids(tok))


def blip_vision_config() -> dict:
    return {"hidden_size": VISION_WIDTH, "intermediate_size": 2 * VISION_WIDTH, "num_hidden_layers": 1,
            "num_attention_heads": 2, "image_size": IMAGE_SIZE, "patch_size": PATCH}


def qformer_config(vocab_size: int | None = None) -> dict:
    out = {"hidden_size": VISION_WIDTH, "intermediate_size": 2 * VISION_WIDTH, "num_hidden_layers": 1,
           "num_attention_heads": 2, "cross_attention_frequency": 1, "encoder_hidden_size": VISION_WIDTH}
    if vocab_size is not None:
        out["vocab_size"] = vocab_size
    return out


def clip_vision_config():
    from transformers import CLIPVisionConfig

    return CLIPVisionConfig(hidden_size=VISION_WIDTH, intermediate_size=2 * VISION_WIDTH, num_hidden_layers=2,
                            num_attention_heads=2, image_size=IMAGE_SIZE, patch_size=PATCH, projection_dim=VISION_WIDTH)


def blip2_config(tok):
    from transformers import Blip2Config

    return Blip2Config(vision_config=blip_vision_config(), qformer_config=qformer_config(),
                       text_config=opt_config(tok).to_dict(), num_query_tokens=QUERY_TOKENS,
                       image_token_index=tok.convert_tokens_to_ids(IMAGE))


def instructblip_config(tok, qformer_tok):
    from transformers import InstructBlipConfig

    qcfg = qformer_config(len(qformer_tok)) | {"pad_token_id": qformer_tok.pad_token_id}
    return InstructBlipConfig(vision_config=blip_vision_config(), qformer_config=qcfg,
                              text_config=llama_config(tok).to_dict(), num_query_tokens=QUERY_TOKENS,
                              image_token_index=tok.convert_tokens_to_ids(IMAGE))


def llava_config(tok):
    from transformers import LlavaConfig

    n_patches = (IMAGE_SIZE // PATCH) ** 2
    return LlavaConfig(vision_config=clip_vision_config().to_dict(), text_config=llama_config(tok).to_dict(),
                       image_token_index=tok.convert_tokens_to_ids(IMAGE), image_seq_length=n_patches,
                       vision_feature_layer=-2, vision_feature_select_strategy="default")
