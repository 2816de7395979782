-- Issue 23: the CUDA FlashAttention kernels as the SIMT interpreter counts them (lab.sim.perf:
-- shared-memory wavefronts per warp request against the conflict-free ideal, global 32-byte
-- sectors per warp request against the coalesced ideal, per kernel and access site). Every
-- shared access of every flash kernel at its ideal (no bank conflict), every global load at
-- or under its ideal (coalesced; lse and delta reads are broadcasts, under it), no hazard,
-- for head dims 64, 96, 128 and 256, causal and not, T != S, and the deterministic backward.
-- Where T or S is not a multiple of the tile, the deterministic dQ kernel's tile copies count
-- up to 6% over the ideal (8.00 sectors per request against 7.53 at T = 70): the interpreter
-- pairs a warp's lanes by the order of their accesses (kernels/simt/README.md), and its tail
-- lanes differ; such cases are held to 1.10x. A regression in a layout (a padding, a swizzle, a
-- load's shape) costs 2x or more and fails here before a GPU.
-- Run: build/llmlab --device sim tests/sim/test_flash_counts.lua (ctest: sim.test_flash_counts)
package.path = (arg[0]:match("(.*/)") or "./") .. "../lua/?.lua;" .. package.path
local T = require("harness")
lab.manual_seed(9)

-- the per-site lines of lab.sim.perf_report() for the flash kernels:
-- {kernel, site, space ("shared"/"global"), kind ("load"/"store"), requests, actual, ideal}
local function sites()
  local out = {}
  for line in lab.sim.perf_report():gmatch("[^\n]+") do
    local kernel, site, space, kind, req, act, ideal =
      line:match("^simt perf: (flash%S*[^>]*>) (%S+ ?%S*) (%a+) (%a+) %d+B: (%d+) requests, ([%d.]+) %a+/request %(ideal ([%d.]+)%)")
    if kernel then
      out[#out + 1] = { kernel = kernel, site = site, space = space, kind = kind, requests = tonumber(req),
        actual = tonumber(act), ideal = tonumber(ideal), line = line }
    end
  end
  return out
end

local function run(D, T_, S, causal, deterministic)
  lab.use_deterministic_algorithms(deterministic)
  lab.sim.reset()
  local q = lab.randn(1, 2, T_, D):to("bf16"):requires_grad_()
  local k = lab.randn(1, 2, S, D):to("bf16"):requires_grad_()
  local v = lab.randn(1, 2, S, D):to("bf16"):requires_grad_()
  lab.sdpa(q, k, v, { causal = causal, impl = "flash" }):sum():backward()
  lab.use_deterministic_algorithms(false)
  return sites(), lab.sim.stats()
end

T.test("flash kernels: no shared bank conflict, every global load coalesced, no hazard (D 64..256)", function()
  lab.sim.perf(true)
  local cases = {
    { 64, 128, 128, true, false }, { 64, 130, 130, true, false }, { 64, 70, 150, false, false },
    { 96, 64, 128, false, true }, { 96, 70, 70, true, false }, { 128, 128, 64, true, true },
    { 128, 100, 100, false, false }, { 128, 70, 90, true, true }, { 256, 64, 64, false, true },
    { 256, 40, 70, false, false }, { 256, 40, 40, true, true }, { 64, 70, 70, false, true },
  }
  local kernels_seen = {}
  for _, c in ipairs(cases) do
    local what = string.format("D=%d T=%d S=%d %s%s", c[1], c[2], c[3], c[4] and "causal" or "full",
      c[5] and " deterministic" or "")
    local ss, stats = run(table.unpack(c))
    local whole = c[2] % 64 == 0 and c[3] % 64 == 0 -- every tile full
    local n_shared, n_load = 0, 0
    for _, s in ipairs(ss) do
      kernels_seen[s.kernel:match("^[%w_]+")] = true
      if s.space == "shared" then
        n_shared = n_shared + 1
        T.ok(s.actual <= s.ideal, what .. ": a shared access with bank conflicts: " .. s.line)
      elseif s.kind == "load" then
        n_load = n_load + 1
        T.ok(s.actual <= s.ideal * (whole and 1 or 1.10), what .. ": an uncoalesced global load: " .. s.line)
      end
    end
    T.ok(n_shared >= 4 and n_load >= 2, what .. ": sites counted (" .. n_shared .. " shared, " .. n_load .. " loads)")
    local flash = 0
    for _, s in ipairs(stats) do
      if s.kernel:find("^flash") then
        flash = flash + 1
        T.eq(s.hazards, 0, what .. ": hazards in " .. s.kernel)
        T.eq(s.shared_wavefronts, s.shared_ideal, what .. ": shared wavefronts of " .. s.kernel)
      end
    end
    T.ok(flash >= 3, what .. ": forward, backward and helpers interpreted (" .. flash .. ")")
  end
  lab.sim.perf(false)
  for _, k in ipairs({ "flash_fwd_k", "flash_bwd_k", "flash_bwd_dq_k", "flash_bwd_pre_k", "flash_bwd_post_k" }) do
    T.ok(kernels_seen[k], k .. " was counted")
  end
end)

T.finish()
