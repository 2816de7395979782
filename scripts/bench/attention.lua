-- Benchmark: causal attention on the CPU, lab.sdpa's FlashAttention kernel (impl='flash',
-- kernels/cpu/flash_attention.c) against standard attention (impl='math': the T x T scores
-- materialised, BLAS products) side by side in one run, forward and forward + backward, with
-- PyTorch's CPU attention (/usr/bin/python3, scripts/bench/peers/attention_torch.py) as a peer.
--   build/llmlab scripts/bench/attention.lua [threads] [T ...]
-- B=1, H=8, D=64, f32. Times: CPU seconds of this process (user + sys, all threads), the best
-- of alternating repeats, so other work on shared cores inflates neither side much; wall
-- seconds beside them. Memory: peak bytes allocated by llmlab during the call (lab.mem);
-- PyTorch's is the growth of its peak RSS (a coarser figure: it includes allocator slack).
-- Targets (issue 14): at T = 8192 the kernel's peak memory <= 5% of math's, and its time no
-- worse than math's for T >= 1024, forward and forward + backward.
local threads = tonumber(arg[1]) or lab.threads()
lab.set_threads(threads)
local lengths = {}
for i = 2, #arg do lengths[#lengths + 1] = tonumber(arg[i]) end
if #lengths == 0 then lengths = { 1024, 2048, 4096, 8192 } end
local B, H, D = 1, 8, 64
local here = arg[0]:match("(.*/)") or "./"
local peer = here .. "peers/attention_torch.py"

-- one call: CPU seconds, wall seconds, peak bytes above what was allocated before
local function measure(q, k, v, impl, backward)
  collectgarbage()
  collectgarbage()
  local before = lab.mem.stats().current
  lab.mem.reset_peak()
  local c0, w0 = lab.dist.cpu_time(), lab.clock()
  if backward then
    local out = lab.sdpa(q, k, v, { causal = true, impl = impl })
    out:sum():backward()
    out:close()
  else
    lab.no_grad(function() lab.sdpa(q, k, v, { causal = true, impl = impl }):close() end)
  end
  local cpu, wall = lab.dist.cpu_time() - c0, lab.clock() - w0
  local peak = lab.mem.stats().peak - before
  for _, t in ipairs({ q, k, v }) do t.grad = nil end
  return cpu, wall, peak
end

local function torch_peer(T)
  local f = io.open("/usr/bin/python3")
  if not f then return nil end
  f:close()
  local p = io.popen(string.format("/usr/bin/python3 %s %d %d %d %d %d %d 2>/dev/null", peer, T, threads, B, H, D,
    T >= 8192 and 1 or 2))
  local line = p and p:read("l")
  if p then p:close() end
  if not line then return nil end
  local r = {}
  for x in line:gmatch("%S+") do r[#r + 1] = tonumber(x) end
  return #r == 5 and r or nil
end

print(string.format("causal attention B=%d H=%d D=%d f32, %d thread(s); CPU s (wall s), best of alternating repeats",
  B, H, D, threads))
print(string.format("%6s %-8s %18s %18s %18s %7s %11s %11s %11s %7s", "T", "pass", "math", "flash", "torch", "fl/math",
  "math peak", "flash peak", "torch rss+", "fl/math"))
local misses = {}
for _, T in ipairs(lengths) do
  local q = lab.randn(B, H, T, D):requires_grad_()
  local k = lab.randn(B, H, T, D):requires_grad_()
  local v = lab.randn(B, H, T, D):requires_grad_()
  local reps = T >= 8192 and 1 or (T >= 4096 and 2 or 3)
  local tp = torch_peer(T)
  for _, bwd in ipairs({ false, true }) do
    local best = { math = { math.huge, math.huge, 0 }, flash = { math.huge, math.huge, 0 } }
    for _ = 1, reps do
      for _, impl in ipairs({ "math", "flash" }) do
        local cpu, wall, peak = measure(q, k, v, impl, bwd)
        local b = best[impl]
        b[1], b[2], b[3] = math.min(b[1], cpu), math.min(b[2], wall), math.max(b[3], peak)
      end
    end
    local m, f = best.math, best.flash
    local tcol = tp and string.format("%7.3f (%7.3f)", bwd and tp[3] or tp[1], bwd and tp[4] or tp[2]) or "(no python3)"
    print(string.format("%6d %-8s %7.3f (%7.3f) %7.3f (%7.3f) %18s %7.2f %11s %11s %11s %7.4f", T,
      bwd and "fwd+bwd" or "fwd", m[1], m[2], f[1], f[2], tcol, f[1] / m[1], lab.format_bytes(m[3]),
      lab.format_bytes(f[3]), tp and lab.format_bytes(tp[5]) or "-", f[3] / m[3]))
    local what = string.format("T=%d %s", T, bwd and "fwd+bwd" or "fwd")
    if f[1] > m[1] then misses[#misses + 1] = what .. ": flash CPU time above math's" end
    if T >= 8192 and f[3] > 0.05 * m[3] then misses[#misses + 1] = what .. ": flash peak memory above 5% of math's" end
  end
  q:close(); k:close(); v:close()
end
print("targets: flash time <= math for T >= 1024 (fwd, fwd+bwd); at T = 8192 flash peak <= 5% of math's")
if #misses == 0 then print("all targets met in this run")
else for _, m in ipairs(misses) do print("MISSED " .. m) end end
