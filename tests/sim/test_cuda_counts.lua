-- Issue 23, defects 10 and 12, counted on the sim device (runtime/cuda's device and
-- runtime/dist/nccl.c over runtime/simrt): NCCL's completion events come from a pool, not one
-- cudaEventCreate per collective (lab.cuda.sim_nccl_events); cuBLASLt plans (descriptors,
-- layouts, a heuristic query with the workspace offered) are made once per shape and kept, and
-- a batched product is one strided-batched cublasLtMatmul call, not one per batch
-- (lab.cuda.sim_counter). At 2 ranks: the collectives take the sim's NCCL.
-- Run: build/llmlab -n 2 --device sim tests/sim/test_cuda_counts.lua (ctest: sim.test_cuda_counts.np2)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
local dist = lab.dist
local n = dist.world()

T.test("100 all_reduces on sim tensors create at most 2 CUDA events (a pool, not one each)", function()
  local t = lab.ones(64, { device = "sim" })
  dist.all_reduce(t) -- the communicator and its first events
  t:to("cpu")
  local e0, c0 = lab.cuda.sim_nccl_events(), lab.cuda.sim_nccl_calls()
  for _ = 1, 100 do
    t:fill_(1)
    dist.all_reduce(t)
  end
  T.eq(lab.cuda.sim_nccl_calls() - c0, 100, "the 100 collectives took the sim's NCCL")
  local made = lab.cuda.sim_nccl_events() - e0
  T.ok(made <= 2, "events created over 100 all_reduces: " .. made)
  T.values(t:to("cpu"):narrow(1, 1, 3), { n, n, n }, 0, "the last sum")
end)

local c = lab.cuda.sim_counter
local function counts() return { plans = c("lt_plans"), heur = c("lt_heuristics"), calls = c("lt_matmuls") } end
local function delta(a, b) return { plans = b.plans - a.plans, heur = b.heur - a.heur, calls = b.calls - a.calls } end

T.test("cuBLASLt: one plan per shape, kept; one call per batched product; the 32 MiB workspace offered", function()
  lab.manual_seed(4)
  local a0, b0 = lab.randn(6, 8, 16, { device = "cpu" }), lab.randn(6, 16, 4, { device = "cpu" })
  local a, b = a0:to("sim"), b0:to("sim")
  local s0 = counts()
  local y = a:matmul(b)
  local d = delta(s0, counts())
  T.eq(d.plans, 1, "first [6, 8, 16] x [6, 16, 4]: plans made")
  T.eq(d.heur, 1, "first: heuristic queries")
  T.eq(d.calls, 1, "first: cublasLtMatmul calls for 6 batches")
  T.eq(c("lt_workspace"), 32 * 2 ^ 20, "the workspace the preference offers")
  T.ok((y:to("cpu") - a0:matmul(b0)):abs():max():item() < 1e-5, "values = cpu")
  s0 = counts()
  for _ = 1, 10 do y = a:matmul(b) end
  d = delta(s0, counts())
  T.eq(d.plans, 0, "10 more of the same shape: no plan made")
  T.eq(d.heur, 0, "10 more: no heuristic query")
  T.eq(d.calls, 10, "10 more: one call each")
  -- the math attention path: B*H = 6 heads, two products (q k^T, p v), each one call
  local q0 = lab.randn(2, 3, 5, 8, { device = "cpu" })
  local q = q0:to("sim")
  s0 = counts()
  local o = lab.sdpa(q, q, q, { impl = "math" })
  d = delta(s0, counts())
  T.eq(d.calls, 2, "math sdpa over 6 heads: cublasLtMatmul calls")
  T.ok((o:to("cpu") - lab.sdpa(q0, q0, q0, { impl = "math" })):abs():max():item() < 1e-5, "sdpa = cpu")
  s0 = counts()
  lab.sdpa(q, q, q, { impl = "math" })
  T.eq(delta(s0, counts()).plans, 0, "the second sdpa: its plans kept")
  -- a plain 2-D product, transposed operands: a plan each, kept
  local m = lab.randn(7, 9)
  s0 = counts()
  m:matmul(m:t())
  m:t():matmul(m)
  m:matmul(m:t())
  d = delta(s0, counts())
  T.eq(d.plans, 2, "two shapes, three products: plans made")
  T.eq(d.calls, 3, "three products: calls")
end)

-- defects 1 and 8: a launch runs on the device of its memory, found from the caching
-- allocators' segments (cudaPointerGetAttributes and cudaSetDevice ran on every launch)
T.test("ops on sim:0 and sim:1 launch on their own device, with no driver query per launch", function()
  local x0 = lab.randn(1000, { device = "cpu" })
  local a, b = x0:to("sim:0"), x0:to("sim:1")
  local q0, l0, l1 = c("pointer_queries"), c("launches:0"), c("launches:1")
  local y = (b * 2 + 1):exp():sum() -- 4 launches on sim:1 (mul, add, exp, sum)
  local z = a:narrow(1, 11, 500):abs() -- a view inside its segment, on sim:0
  T.eq(c("launches:1") - l1, 4, "launches on sim:1")
  T.eq(c("launches:0") - l0, 1, "launches on sim:0")
  T.eq(c("pointer_queries") - q0, 0, "driver queries for the launches' devices")
  T.near(y:item(), (x0 * 2 + 1):exp():sum():item(), 1e-3, "sum on sim:1 = cpu")
  T.eq((z:to("cpu") - x0:narrow(1, 11, 500):abs()):abs():max():item(), 0, "view on sim:0 = cpu")
end)

T.finish()
