-- Benchmark: square f32 matmul GFLOP/s through lab vs the same sgemm called from C
-- (scripts/bench/peers/matmul_blas.c), size by size, side by side in one run.
--   build/llmlab scripts/bench/matmul.lua [threads]
-- Target: lab / C >= 0.95 at every size.
local threads = tonumber(arg[1]) or lab.threads()
lab.set_threads(threads)
local peer = (arg[0]:match("(.*/)") or "./") .. "../../build/scripts/bench/matmul_blas"
local f = io.open(peer)
if not f then peer = "build/scripts/bench/matmul_blas" else f:close() end

local function lab_best(n, reps)
  local a, b = lab.randn(n, n), lab.randn(n, n)
  a:matmul(b) -- warm-up
  local best = math.huge
  for _ = 1, reps do
    local t0 = lab.clock()
    local c = a:matmul(b)
    best = math.min(best, lab.clock() - t0)
    c:close()
  end
  return best
end

local function peer_best(n, reps)
  local p = assert(io.popen(string.format("%s %d %d %d", peer, n, reps, threads)))
  local t = tonumber(p:read("l"))
  p:close()
  return t
end

print(string.format("f32 matmul, %d thread(s): GFLOP/s, best of repeats", threads))
print(string.format("%6s %10s %10s %8s", "n", "lab", "C/BLAS", "ratio"))
local worst = math.huge
for _, n in ipairs({ 256, 512, 1024, 2048 }) do
  local reps = n <= 512 and 20 or (n == 1024 and 6 or 3)
  local flops = 2.0 * n * n * n
  -- alternate the two so drift in machine speed hits both
  local tl, tc = math.huge, math.huge
  for _ = 1, 5 do -- this machine's speed drifts: five alternating rounds, best of each side
    tl = math.min(tl, lab_best(n, reps))
    tc = math.min(tc, peer_best(n, reps))
  end
  local gl, gc = flops / tl / 1e9, flops / tc / 1e9
  worst = math.min(worst, gl / gc)
  print(string.format("%6d %10.1f %10.1f %8.3f", n, gl, gc, gl / gc))
end
print(string.format("worst ratio %.3f (target >= 0.95)", worst))
