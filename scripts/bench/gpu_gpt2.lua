-- GPT-2 small (124M: 12 layers, 12 heads, d_model 768, vocab 50257, seq 1024) trained with
-- AdamW in bf16 mixed precision on a CUDA device: tokens/s and MFU over 10 steps after 2 of
-- warm-up, to set beside gpu_gpt2_torch.py (PyTorch eager, the same config) on the same GPU.
--   build/llmlab scripts/bench/gpu_gpt2.lua [batch=8] [steps=10] [peak_tflops=989]
if not lab.cuda.is_available() then
  print("no CUDA device: " .. lab.cuda.status())
  os.exit(77)
end
local o = { batch = 8, steps = 10, peak_tflops = 989 } -- H100/H200 dense bf16 peak
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.+)$")
  if k then o[k] = tonumber(v) end
end
lab.set_default_device("cuda")
lab.manual_seed(0)
local cfg = { vocab = 50257, d_model = 768, n_layer = 12, n_head = 12, seq_len = 1024 }
local m = lab.nn.GPT(cfg)
local mp = lab.amp.MixedPrecision(m, {
  dtype = "bf16",
  optimizer = function(ps) return lab.optim.AdamW(ps, { lr = 3e-4 }) end,
})
local function step()
  local ids = lab.randint(0, cfg.vocab, { o.batch, cfg.seq_len })
  mp:zero_grad()
  local _, loss = m(ids, ids)
  mp:backward(loss)
  mp:step()
  return loss
end
for _ = 1, 2 do step() end
lab.cuda.synchronize()
local t0 = lab.clock()
local loss
for _ = 1, o.steps do loss = step() end
lab.cuda.synchronize()
local s = (lab.clock() - t0) / o.steps
local tok = o.batch * cfg.seq_len / s
local mfu = tok * m:flops_per_token() / (o.peak_tflops * 1e12)
print(string.format("lab   GPT-2 124M bf16 batch %d x %d: %.1f ms/step, %.0f tokens/s, MFU %.1f%% (loss %.3f)",
  o.batch, cfg.seq_len, s * 1e3, tok, 100 * mfu, loss:item()))
