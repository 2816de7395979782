-- What lab.monitor.check_replicas, and the whole monitor, cost against a training step of the benchmark GPT
-- (vocab 512, d_model 256, 4 layers, 4 heads, seq 128, untied head, fp32, AdamW, per-rank
-- batch 8, DDP): the median of 5 timed steps and of 5 checks, after one warm-up of each.
--   scripts/llmlab -n 2 scripts/bench/check_replicas.lua
local cfg = { vocab = 512, d_model = 256, n_layer = 4, n_head = 4, seq_len = 128, tied = false }
lab.manual_seed(1)
local gpt = lab.nn.GPT(cfg)
local model = lab.ddp.wrap(gpt)
local opt = lab.optim.AdamW(model:parameters(), { lr = 1e-4 })
local ids = lab.randint(0, cfg.vocab, { 8, cfg.seq_len })
local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end
local function step()
  opt:zero_grad()
  local _, loss = model(ids, ids)
  loss:backward()
  opt:step()
end
local steps, checks, weights = {}, {}, {}
step()
lab.monitor.check_replicas(gpt)
for i = 1, 5 do
  lab.dist.barrier()
  local t0 = lab.clock()
  step()
  steps[i] = lab.clock() - t0
  lab.dist.barrier()
  t0 = lab.clock()
  local diff = lab.monitor.check_replicas(gpt, { optimizer = opt })
  checks[i] = lab.clock() - t0
  lab.dist.barrier()
  t0 = lab.clock()
  lab.monitor.check_replicas(gpt)
  weights[i] = lab.clock() - t0
  assert(#diff == 0, "replicas differ")
end
-- a step with the whole monitor: hooks on every module, gradient norms, bucket and replica
-- checksums, the gathers, the update ratio
-- (alternating with plain steps, so the machine's load changes both alike)
local watched, plain = {}, {}
for i = 1, 5 do
  lab.dist.barrier()
  local t0 = lab.clock()
  step()
  plain[i] = lab.clock() - t0
  local mon = lab.monitor.new(model, { optimizer = opt })
  lab.dist.barrier()
  t0 = lab.clock()
  mon:begin(i)
  opt:zero_grad()
  local _, loss = model(ids, ids)
  loss:backward()
  mon:check({ loss = loss })
  opt:step()
  mon:finish()
  watched[i] = lab.clock() - t0
  mon:remove()
end
local s, c, w, mw, pl = median(steps), median(checks), median(weights), median(watched), median(plain)
lab.print0(string.format("%.2fM parameters, %d rank(s): step %.1f ms; check_replicas: weights %.2f ms = %.2f%% of a step, "
  .. "weights and AdamW state %.2f ms = %.2f%%", gpt:num_parameters() / 1e6, lab.dist.world(), s * 1e3, w * 1e3,
  100 * w / s, c * 1e3, 100 * c / s))
lab.print0(string.format("a step with lab.monitor on (every check, every step): %.1f ms against %.1f ms without = %+.1f%%", mw * 1e3,
  pl * 1e3, 100 * (mw / pl - 1)))
