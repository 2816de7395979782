-- lab.plan against what actually happens here: for a small GPT trained with DDP, ZeRO-1/2/3
-- and tensor parallelism at the world size, the planner's per-GPU memory account is within
-- 5% of lab.mem's measurement and its communication bytes equal lab.dist.stats() exactly.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local n = lab.dist.world()
local B, S = 2, 8

-- sizes chosen so that every module's parameter count divides by 1, 2 and 4 (no padding)
local function cfg(tied) return { vocab = 32, d_model = 16, n_layer = 2, n_head = 4, seq_len = S, tied = tied } end
local function planner_model(c)
  return { layers = c.n_layer, hidden = c.d_model, heads = c.n_head, kv_heads = c.n_head, ffn = 4 * c.d_model,
    vocab = c.vocab, gated = false, tied = c.tied ~= false, bias = true, pos_emb = true, seq_len = c.seq_len }
end
local GPU = { bf16 = 1e12, hbm = 1e12, nvlink = 1e9, network = 1e9, per_node = 8 }

local function tag(t)
  collectgarbage()
  return lab.mem.stats().tags[t].current
end

-- trains two steps; returns measured {params, grads, optimizer} and the second step's
-- traffic (wire bytes) by op over all groups
local function run(build)
  collectgarbage()
  local base = { param = tag("param"), grad = tag("grad"), optimizer = tag("optimizer") }
  local model, step, zero_grad = build()
  lab.manual_seed(3)
  local ids = lab.randint(0, 32, { B, S })
  local grads, traffic
  for k = 1, 2 do
    zero_grad()
    lab.dist.reset_stats()
    local _, loss = model(ids, ids)
    loss:backward()
    grads = tag("grad") - base.grad
    step()
    if k == 2 then
      traffic = {}
      for _, ops in pairs(lab.dist.stats()) do
        for op, v in pairs(ops) do traffic[op] = (traffic[op] or 0) + v.wire_bytes end
      end
    end
  end
  return { params = tag("param") - base.param, grads = grads, optimizer = tag("optimizer") - base.optimizer }, traffic
end

local function check_memory(what, measured, r)
  for _, k in ipairs({ "params", "grads", "optimizer" }) do
    local est = r["mem_" .. k]
    T.ok(math.abs(measured[k] - est) <= 0.05 * est, string.format("%s %s: measured %d, planned %.0f", what, k, measured[k], est))
  end
end

for zero = 0, 3 do
  T.test(string.format("data parallel, ZeRO %d: memory and traffic as planned", zero), function()
    local c = cfg(zero < 3) -- ZeRO-3 gathers per module: an untied head is its own module
    local measured, traffic = run(function()
      lab.manual_seed(1)
      local gpt = lab.nn.GPT(c)
      if zero == 0 then
        local m = lab.ddp.wrap(gpt)
        local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-3 })
        return m, function() opt:step() end, function() opt:zero_grad() end
      end
      local z = lab.zero.wrap(gpt, { stage = zero, lr = 1e-3 })
      return z, function() z:step() end, function() z:zero_grad() end
    end)
    local r = lab.plan.evaluate(planner_model(c), GPU, { precision = "f32", seq = S, global_batch = B * n },
      { dp = n, tp = 1, pp = 1, zero = zero, mb = B, recompute = "none" })
    check_memory("zero " .. zero, measured, r)
    local wire = (traffic.all_reduce or 0) + (traffic.all_gather or 0) + (traffic.reduce_scatter or 0)
    T.eq(wire, math.floor(r.bytes_dp + 0.5), "data-parallel wire bytes per step")
  end)
end

T.test("tensor parallel: memory and traffic as planned", function()
  local c = cfg(false)
  local grid = lab.dist.grid { tp = n }
  local measured, traffic = run(function()
    lab.manual_seed(1)
    local m = lab.tp.GPT(c, { group = grid.tp_group })
    local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-3 })
    return m, function() opt:step() end, function() opt:zero_grad() end
  end)
  local r = lab.plan.evaluate(planner_model(c), GPU, { precision = "f32", seq = S, global_batch = B, sequence_parallel = false },
    { dp = 1, tp = n, pp = 1, zero = 0, mb = B, recompute = "none" })
  check_memory("tp " .. n, measured, r)
  T.eq(traffic.all_reduce or 0, math.floor(r.bytes_tp + 0.5), "tensor-parallel wire bytes per step")
end)

T.finish()
