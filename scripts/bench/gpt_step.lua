-- Measures GPT training steps (fp32, AdamW) at one of the configurations of issue 17:
--   tiny  vocab 256,  d_model 128, 2 layers, 4 heads, seq 64,   batch 8
--   base  vocab 512,  d_model 256, 4 layers, 4 heads, seq 128,  batch 8   (issue 7's)
--   big   vocab 2048, d_model 512, 8 layers, 8 heads, seq 256,  batch 8
--   long  vocab 512,  d_model 256, 4 layers, 4 heads, seq 1024, batch 2
--   build/llmlab scripts/bench/gpt_step.lua [threads] [steps] [config] [profile]
-- Prints one line: config, threads, tokens per step, tokens/s, ms/step, CPU ms/step (all threads), MFLOP/token, peak
-- RSS MiB. With "profile" the kernel profiler is on and a second line gives each category's
-- CPU ms per step ("lua" = the step's CPU time outside kernels: autograd, allocation, Lua).
local threads, steps = tonumber(arg[1]) or lab.threads(), tonumber(arg[2]) or 20
local name, profile = arg[3] or "base", arg[4] == "profile"
local configs = {
  tiny = { vocab = 256, d_model = 128, n_layer = 2, n_head = 4, seq_len = 64, B = 8 },
  base = { vocab = 512, d_model = 256, n_layer = 4, n_head = 4, seq_len = 128, B = 8 },
  big = { vocab = 2048, d_model = 512, n_layer = 8, n_head = 8, seq_len = 256, B = 8 },
  long = { vocab = 512, d_model = 256, n_layer = 4, n_head = 4, seq_len = 1024, B = 2 },
}
local cfg = assert(configs[name], "config must be tiny, base, big or long")
lab.set_threads(threads)
lab.manual_seed(0)
local B, T = cfg.B, cfg.seq_len
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
for _ = 1, 2 do step() end -- warm-up: allocator, BLAS buffers, optimizer state
if profile then lab.prof.kernels(true) end
local t0, c0 = lab.clock(), lab.dist.cpu_time()
for _ = 1, steps do step() end
local dt, dc = (lab.clock() - t0) / steps, (lab.dist.cpu_time() - c0) / steps
local kt = profile and lab.prof.kernel_totals()
if profile then lab.prof.kernels(false) end
local rss = 0
for line in io.lines("/proc/self/status") do
  local kb = line:match("^VmHWM:%s+(%d+)")
  if kb then rss = tonumber(kb) / 1024 end
end
print(string.format("llmlab config=%s threads=%d tokens_per_step=%d tokens_per_s=%.0f ms_per_step=%.1f cpu_ms_per_step=%.1f mflop_per_token=%.2f peak_rss_mib=%.0f",
  name, threads, B * T, B * T / dt, dt * 1e3, dc * 1e3, model:flops_per_token() / 1e6, rss))
if profile then
  local parts, inside = {}, 0
  for _, c in ipairs({ "gemm", "attention", "norm", "activation", "elementwise", "embedding", "loss", "optimizer" }) do
    parts[#parts + 1] = string.format("%s=%.1f", c, kt[c].cpu / steps * 1e3)
    inside = inside + kt[c].cpu
  end
  parts[#parts + 1] = string.format("lua=%.1f", (dc * steps - inside) / steps * 1e3)
  print("profile cpu_ms_per_step " .. table.concat(parts, " "))
end
