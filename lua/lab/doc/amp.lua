-- Docstrings of lab.amp (help(lab.amp.MixedPrecision)): lua/lab/amp.lua and fp8.lua.
return {
  MixedPrecision = "lab.amp.MixedPrecision(model, {dtype='bf16'|'f16', optimizer=, loss_scale=, clip=, group=}) -> mp: half-precision compute with f32 master weights; mp:step(loss)",
  DelayedScaling = "lab.amp.DelayedScaling([opts]) -> recipe: FP8 scaling from the amax history (Transformer Engine's recipe)",
  ScalingMeta = "lab.amp.ScalingMeta(name, format, recipe) -> meta: one FP8 tensor's scale and amax history ('e4m3' or 'e5m2')",
}
