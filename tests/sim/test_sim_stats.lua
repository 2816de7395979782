-- lab.sim.stats() and lab.prof.kernel_table() on the sim device with the SIMT interpreter:
-- what the interpreter recorded of the CUDA FlashAttention kernels (launches, grid, block,
-- shared bytes, the barriers each block passed, so the tiles it visited, and hazards), and
-- the kernel table that lists them. bf16, D=64, T=S=130: three 64-row tiles, the last partial.
-- Run: build/llmlab --device sim tests/sim/test_sim_stats.lua (ctest: sim.test_sim_stats)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
lab.manual_seed(3)

-- runs bf16 flash attention forward and backward, returns the stats rows by kernel prefix
local function run(causal)
  lab.sim.reset()
  local q, k, v = lab.randn(1, 2, 130, 64):to("bf16"), lab.randn(1, 2, 130, 64):to("bf16"), lab.randn(1, 2, 130, 64):to("bf16")
  q:requires_grad_(); k:requires_grad_(); v:requires_grad_()
  lab.sdpa(q, k, v, { causal = causal, impl = "flash" }):sum():backward()
  local by = {}
  for _, s in ipairs(lab.sim.stats()) do by[s.kernel:match("^[%w_]+")] = s end
  return by
end

T.test("lab.sim is there where the build has the interpreter", function()
  T.ok(lab.sim.available, "lab.sim.available (this test is registered only for builds with the interpreter)")
  T.ok(not pcall(lab.sim.perf, 1), "lab.sim.perf(1) is refused")
  local ok, err = pcall(lab.sim.perf, "yes")
  T.ok(not ok and err:find("lab.sim.perf", 1, true) and err:find("rank 0", 1, true), "the error names the op and rank: " .. tostring(err))
end)

T.test("flash forward: blocks, shape, shared bytes and the key tiles each block visited", function()
  for _, causal in ipairs({ false, true }) do
    local f = run(causal).flash_fwd_k
    T.ok(f ~= nil, "flash_fwd_k ran interpreted")
    T.eq(f.launches, 1, "one launch")
    T.eq(f.blocks, 6, "2 heads x 3 query tiles")
    T.eq(f.grid[1], 6, "grid.x")
    T.eq(f.block[1], 128, "4 warps")
    T.eq(f.shared_bytes, (64 + 64 + 64) * (64 + 8) * 2, "Q, K and V tiles, padded rows")
    T.eq(f.hazards, 0, "no hazard")
    -- two barriers per key tile and one before the output: 3 tiles -> 7; causal: query tile i sees i+1 key tiles
    T.eq(f.block_barriers_max, 7, "the last query tile visits all 3 key tiles")
    T.eq(f.block_barriers_min, causal and 3 or 7, "the first query tile visits " .. (causal and "1" or "3"))
    T.eq(f.barriers, 2 * (causal and (1 + 2 * 1) + (1 + 2 * 2) + (1 + 2 * 3) or 3 * 7), "barriers of all blocks")
  end
end)

T.test("flash backward: key-tile blocks and the query tiles each visited; its helper kernels listed", function()
  for _, causal in ipairs({ false, true }) do
    local by = run(causal)
    local b = by.flash_bwd_k
    T.ok(b ~= nil and by.flash_bwd_pre_k ~= nil and by.flash_bwd_post_k ~= nil, "the backward's three kernels")
    T.eq(b.blocks, 6, "2 heads x 3 key tiles")
    T.eq(b.block[1], 128, "4 warps")
    T.ok(b.shared_bytes > 0, "dynamic shared memory")
    T.eq(b.hazards, 0, "no hazard")
    -- two barriers per query tile and two before the dK/dV output (kernels/cuda/flash_attention_bwd.cu);
    -- causal: key tile j is seen by query tiles j..2
    T.eq(b.block_barriers_max, 8, "key tile 0 is seen by all 3 query tiles")
    T.eq(b.block_barriers_min, causal and 4 or 8, "the last key tile by " .. (causal and "1" or "3"))
  end
end)

T.test("lab.sim.reset() forgets; lab.prof.kernels(true) resets it too", function()
  run(false)
  T.ok(#lab.sim.stats() > 0, "kernels recorded")
  lab.sim.reset()
  T.eq(#lab.sim.stats(), 0, "none after reset")
  run(false)
  lab.prof.kernels(true)
  T.eq(#lab.sim.stats(), 0, "none after lab.prof.kernels(true)")
  lab.prof.kernels(false)
end)

T.test("lab.prof.kernel_table lists the interpreted kernels: launches, grid/block, shared bytes, hazards", function()
  local q, k, v = lab.randn(1, 2, 130, 64):to("bf16"), lab.randn(1, 2, 130, 64):to("bf16"), lab.randn(1, 2, 130, 64):to("bf16")
  lab.prof.kernels(true)
  lab.sdpa(q, k, v, { causal = true, impl = "flash" })
  lab.sdpa(q, k, v, { causal = false, impl = "flash" })
  local lines, print0 = {}, print
  print = function(s) lines[#lines + 1] = s end -- luacheck: ignore
  local ok, res = pcall(lab.prof.kernel_table)
  print = print0 -- luacheck: ignore
  lab.prof.kernels(false)
  T.ok(ok, tostring(res))
  local text = table.concat(lines, "\n")
  T.ok(text:find("interpreted kernel (sim)", 1, true) and text:find("launches", 1, true)
    and text:find("shared B", 1, true) and text:find("hazards", 1, true), "the header:\n" .. text)
  local row = text:match("flash_fwd_k<__nv_bfloat16, 64>[^\n]*")
  T.ok(row ~= nil, "a row for the forward kernel:\n" .. text)
  local launches, grid, block, shared, blocks, hazards = (row or ""):match(">%s+(%d+)%s+(%S+)%s+(%S+)%s+(%d+)%s+(%d+)%s+(%d+)$")
  T.eq(tonumber(launches), 2, "launches: " .. tostring(row))
  T.eq(grid, "6", "grid")
  T.eq(block, "128", "block")
  T.eq(tonumber(shared), 27648, "shared bytes")
  T.eq(tonumber(blocks), 12, "blocks over both launches")
  T.eq(tonumber(hazards), 0, "hazards")
  T.eq(#res.sim, 1, "only the forward ran since kernels(true)")
  local quiet = lab.prof.kernel_table({ print = false })
  T.ok(quiet.sim and quiet.categories, "print=false returns the rows")
end)

T.finish()
