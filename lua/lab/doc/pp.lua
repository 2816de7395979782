-- Docstrings of lab.pp, pipeline parallelism (help(lab.pp.Pipeline)): lua/lab/pp.lua.
return {
  Pipeline = "lab.pp.Pipeline(stage, {group=, micro_batches=, schedule='gpipe'|'1f1b'|'interleaved', loss=, activation_shape=}) -> pipe: pipe:train_step(batch)",
  partition = "lab.pp.partition(layers, n[, {sizes=}]) -> list: the layers split into n stages",
  gpt_pieces = "lab.pp.gpt_pieces(model) -> layers: a GPT (untied head) as a list of layers for partition",
  max_in_flight = "lab.pp.max_in_flight(schedule, p, s, m[, v]) -> integer: micro-batches stage s holds at most",
}
