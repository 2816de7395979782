-- Measures GPT training steps at the benchmark configuration of issue 7: vocab 512,
-- d_model 256, 4 layers, 4 heads, seq 128, batch 8, fp32, AdamW.
--   build/llmlab scripts/bench/gpt_step.lua [threads] [steps]
-- Prints one line: threads, tokens/s, ms/step, MFLOP/token, peak RSS MiB.
local threads, steps = tonumber(arg[1]) or lab.threads(), tonumber(arg[2]) or 20
lab.set_threads(threads)
lab.manual_seed(0)
local cfg = { vocab = 512, d_model = 256, n_layer = 4, n_head = 4, seq_len = 128 }
local B, T = 8, 128
local model = lab.nn.GPT(cfg)
local opt = lab.optim.AdamW(model:parameters(), { lr = 3e-4, weight_decay = 0.1 })
local ids = lab.randint(0, cfg.vocab, { B, T })
local tg = lab.randint(0, cfg.vocab, { B, T })
local function step()
  local _, loss = model(ids, tg)
  opt:zero_grad()
  loss:backward()
  opt:step()
  return loss
end
for _ = 1, 3 do step() end -- warm-up: allocator, BLAS buffers, optimizer state
local t0 = lab.clock()
for _ = 1, steps do step() end
local dt = (lab.clock() - t0) / steps
local rss = 0
for line in io.lines("/proc/self/status") do
  local kb = line:match("^VmHWM:%s+(%d+)")
  if kb then rss = tonumber(kb) / 1024 end
end
print(string.format("llmlab threads=%d tokens_per_s=%.0f ms_per_step=%.1f mflop_per_token=%.2f peak_rss_mib=%.0f",
  threads, B * T / dt, dt * 1e3, model:flops_per_token() / 1e6, rss))
