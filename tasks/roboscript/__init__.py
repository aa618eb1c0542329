"""RoboScript data pipeline: asset catalog, world sampler, scene text, task queries, hierarchical code generation
with grammar / API checks, and the benchmark tasks of the paper's Table I. See docs/roboscript-data.md."""
