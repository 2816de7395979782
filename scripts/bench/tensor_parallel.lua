-- The benchmark GPT (vocab 512, d_model 256, 4 layers, 4 heads, seq 128, untied head,
-- fp32, AdamW, global batch 8) under one layout:
--   tp1: one rank;  tp2: 2 ranks, tensor parallel;  dp2: 2 ranks, DDP (batch 4 each)
-- Prints on rank 0: mode, step time, tokens/s, and the share of the step spent inside
-- collectives (the largest over ranks).
--   mpirun -np 2 build/llmlab scripts/bench/tensor_parallel.lua tp2 [steps]
local mode, steps = arg[1] or "tp2", tonumber(arg[2]) or 8
local n = lab.dist.world()
local cfg = { vocab = 512, d_model = 256, n_layer = 4, n_head = 4, seq_len = 128, tied = false }
local B, T = 8, 128
lab.manual_seed(0)
local model, batch
if mode == "tp1" then
  model, batch = lab.nn.GPT(cfg), B
elseif mode == "tp2" then
  model, batch = lab.tp.GPT(cfg, { grid = lab.dist.grid { tp = n } }), B
elseif mode == "dp2" then
  model, batch = lab.ddp.wrap(lab.nn.GPT(cfg)), B // n
else
  error("mode must be tp1, tp2 or dp2", 0)
end
local opt = lab.optim.AdamW(model:parameters(), { lr = 3e-4 })
lab.manual_seed(1)
local ids = lab.randint(0, cfg.vocab, { B, T })
local mine = mode == "dp2" and ids:slice(1, lab.dist.rank() * batch + 1, (lab.dist.rank() + 1) * batch) or ids
local function step()
  opt:zero_grad()
  local _, loss = model(mine, mine)
  loss:backward()
  opt:step()
end
for _ = 1, 2 do step() end
lab.dist.barrier()
local c0, t0 = lab.dist.comm_time(), lab.clock()
for _ = 1, steps do step() end
local dt, dc = (lab.clock() - t0) / steps, (lab.dist.comm_time() - c0) / steps
local share = lab.tensor({ dc / dt }, { dtype = "f64" })
lab.dist.all_reduce(share, "max")
lab.print0(string.format("%-4s ranks=%d ms_per_step=%.1f tokens_per_s=%.0f comm_share=%.1f%%", mode, n, dt * 1e3,
  B * T / dt, 100 * share[1]))
