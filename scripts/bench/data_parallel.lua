-- Data-parallel training of the benchmark GPT (vocab 512, d_model 256, 4 layers, 4 heads,
-- seq 128, untied head, fp32, AdamW), per-rank batch 8, in one of these modes:
--   single | ddp | ddp_nooverlap | zero1 | zero2 | zero3
-- Prints on rank 0: mode, ranks, global tokens/s, ms/step, and the largest per-rank peak of
-- tensor memory and of RSS.
--   mpirun -np 2 build/llmlab scripts/bench/data_parallel.lua ddp [steps]
local mode, steps = arg[1] or "ddp", tonumber(arg[2]) or 10
local n = lab.dist.world()
lab.manual_seed(0)
local cfg = { vocab = 512, d_model = 256, n_layer = 4, n_head = 4, seq_len = 128, tied = false }
local B, T = 8, 128
local model = lab.nn.GPT(cfg)
local step
if mode == "single" then
  local opt = lab.optim.AdamW(model:parameters(), { lr = 3e-4 })
  step = function(ids, tg)
    opt:zero_grad()
    local _, loss = model(ids, tg)
    loss:backward()
    opt:step()
  end
elseif mode == "ddp" or mode == "ddp_nooverlap" then
  local ddp = lab.ddp.wrap(model, { overlap = mode == "ddp" })
  local opt = lab.optim.AdamW(ddp:parameters(), { lr = 3e-4 })
  step = function(ids, tg)
    opt:zero_grad()
    local _, loss = ddp(ids, tg)
    loss:backward()
    opt:step()
  end
else
  local stage = tonumber(mode:match("^zero(%d)$"))
  assert(stage, "mode must be single, ddp, ddp_nooverlap, zero1, zero2 or zero3")
  local z = lab.zero.wrap(model, { stage = stage, lr = 3e-4, bucket_mb = 4 })
  step = function(ids, tg)
    z:zero_grad()
    local _, loss = z(ids, tg)
    loss:backward()
    z:step()
  end
end
lab.seed_per_rank(1)
local ids, tg = lab.randint(0, cfg.vocab, { B, T }), lab.randint(0, cfg.vocab, { B, T })
for _ = 1, 2 do step(ids, tg) end
lab.mem.reset_peak()
lab.dist.barrier()
local t0 = lab.clock()
for _ = 1, steps do step(ids, tg) end
lab.dist.barrier()
local dt = (lab.clock() - t0) / steps
local rss = 0
for line in io.lines("/proc/self/status") do
  local kb = line:match("^VmHWM:%s+(%d+)")
  if kb then rss = tonumber(kb) / 1024 end
end
local m = lab.tensor({ lab.mem.stats().peak / 2 ^ 20, rss }, { dtype = "f64" })
lab.dist.all_reduce(m, "max")
lab.print0(string.format("%-14s ranks=%d tokens_per_s=%.0f ms_per_step=%.1f peak_tensor_mib=%.1f peak_rss_mib=%.0f",
  mode, n, n * B * T / dt, dt * 1e3, m[1], m[2]))
