-- lab.plan against published large-scale trainings: the published layout must be among
-- the feasible ones, and the estimated utilisation within +-25% of the published figure.
-- Megatron-LM's 2021 scaling runs (Narayanan et al., SC'21, arXiv:2104.04473, Table 1:
-- A100-80GB, seq 2048, full activation recomputation; their "% of peak" counts the
-- recomputation, so it is compared with the planner's HFU) and Llama 3 405B (Llama Team,
-- "The Llama 3 Herd of Models", arXiv:2407.21783, Table 4: 8192 H100, TP 8, CP 1, PP 16,
-- DP 64, seq 8192, batch 16M tokens, 43% BF16 MFU).
package.path = (arg[0]:match("(.*/)") or "./") .. "../?.lua;" .. package.path
local T = require("harness")

local published = {
  { "megatron-1.7b", "a100-80", 32, 512, 2048, 1, 1, 0.44, "hfu" },
  { "megatron-7.5b", "a100-80", 128, 512, 2048, 4, 1, 0.46, "hfu" },
  { "megatron-39.1b", "a100-80", 512, 1536, 2048, 8, 2, 0.44, "hfu" },
  { "megatron-145.6b", "a100-80", 1536, 2304, 2048, 8, 8, 0.47, "hfu" },
  { "megatron-1t", "a100-80", 3072, 3072, 2048, 8, 64, 0.52, "hfu" },
  { "llama3-405b", "h100", 8192, 2048, 8192, 8, 16, 0.43, "mfu" },
}

for _, p in ipairs(published) do
  T.test(string.format("%s on %d %s: tp %d pp %d is feasible, utilisation within 25%%", p[1], p[3], p[2], p[6], p[7]), function()
    local recompute = p[9] == "hfu" and "full" or nil
    local res = lab.plan.enumerate { model = p[1], gpu = p[2], gpus = p[3], global_batch = p[4], seq = p[5], tp = p[6], pp = p[7],
      zero = p[9] == "hfu" and 0 or { 1, 2, 3 }, recompute = recompute }
    T.ok(#res > 0, "the published layout fits")
    local best = res[1]
    if best then
      local got = best[p[9]]
      print(string.format("  %-16s %-18s estimated %s %.1f%%, published %.0f%%", p[1], lab.plan.layout(best), p[9]:upper(), 100 * got, 100 * p[8]))
      T.ok(math.abs(got - p[8]) <= 0.25 * p[8], string.format("%s %.3f vs published %.2f", p[9], got, p[8]))
    end
  end)
end

T.test("the planner's numbers for one layout are the formulas'", function()
  local m = { layers = 2, hidden = 64, heads = 4, ffn = 256, vocab = 100, gated = false, tied = true }
  local c = lab.plan.param_counts(m)
  T.eq(c.total, 2 * (12 * 64 * 64 + 4 * 64) + 100 * 64 + 2 * 64, "12 h^2 per layer + two norms + embedding + final norm")
  local r = lab.plan.evaluate(m, { bf16 = 1e15, hbm = 1e12, nvlink = 1e11, network = 1e10, per_node = 8 },
    { seq = 128, global_batch = 16 }, { dp = 4, tp = 1, pp = 1, zero = 1, mb = 4, recompute = "none" })
  T.eq(r.mem_params, 2 * c.total, "bf16 parameters")
  T.eq(r.mem_optimizer, 12 * c.total / 4, "ZeRO-1: K = 12 bytes over dp")
  T.near(r.bytes_dp, 2 * 3 / 4 * 2 * c.total, 1e-12, "ring all-reduce of bf16 gradients")
  T.eq(r.bubble, 0)
  local bad = lab.plan.enumerate { model = "llama3-405b", gpu = "a100-40", gpus = 8, global_batch = 8, seq = 4096 }
  T.eq(#bad, 0, "405B does not fit on 8 A100-40GB")
end)

T.test("output formats", function()
  local o = { model = "llama2-7b", gpus = 16, gpu = "h100", global_batch = 64, seq = 4096, top = 3 }
  local res = lab.plan(o)
  T.ok(#res > 0)
  o.format = "csv"
  lab.plan(o)
  o.format = "json"
  lab.plan(o)
  T.raises(function() lab.plan { model = "nope", gpus = 8, global_batch = 8, seq = 8 } end, "unknown model")
end)

T.finish()
