-- Lab 08: FlashAttention against standard attention.
--
-- What it shows: standard attention computes the whole T x T score matrix, softmaxes it
-- and multiplies by V, so its memory grows with T^2. FlashAttention (Dao et al. 2022)
-- walks over blocks of K and V keeping, for each row of Q, only a running maximum m, a
-- running sum l and a running output O; when a new block raises the maximum, the old sum
-- and output are rescaled by exp(m_old - m_new) ("online softmax"). The result is exactly
-- softmax(Q K^T / sqrt(D)) V, with memory linear in T. Here the algorithm is written out
-- in Lua over tensor blocks, checked against lab.sdpa (standard attention) with and
-- without the causal mask, and its peak memory measured against the standard one's for
-- growing T; the ranks split the sweep, one sequence length each.
--   scripts/llmlab -n 4 scripts/labs/08_flash_attention.lua
--
-- What it cannot show on a CPU: FlashAttention's speed on GPUs comes from keeping the
-- blocks in on-chip SRAM instead of writing the T x T matrix to HBM and reading it back.
-- Here every block op is a separate call through main memory, so the times printed say
-- little about GPUs; the memory and the exactness are what carry over.
local dist = lab.dist
local rank, world = dist.rank(), dist.world()
local check, finish = lab.checker(64)
lab.print0(string.format("== Lab 08: FlashAttention vs standard attention, %d ranks ==", world))

-- q [B, H, T, D], k and v [B, H, S, D] -> O [B, H, T, D] and the log-sum-exp of each row
-- (what FlashAttention's backward keeps instead of the probabilities). The block's
-- temporaries are `<close>` variables: Lua would otherwise keep every block's scores until
-- the collector runs, and the memory would be quadratic again (a GPU kernel keeps them in
-- registers and shared memory, which vanish with the block).
local function flash_attention(q, k, v, opts)
  opts = opts or {}
  local block = opts.block or 64
  local causal = opts.causal
  local B, H, T, D = q.shape[1], q.shape[2], q.shape[3], q.shape[4]
  local S = k.shape[3]
  local scale = 1 / math.sqrt(D)
  local outs, lses = {}, {}
  for i0 = 1, T, block do
    local br = math.min(block, T - i0 + 1)
    local qi <close> = q:narrow(3, i0, br) * scale
    local m <close> = lab.full({ B, H, br, 1 }, -math.huge) -- running row maximum
    local l <close> = lab.zeros(B, H, br, 1)                 -- running sum of exp(s - m)
    local o <close> = lab.zeros(B, H, br, D)                 -- running (unnormalised) output
    local last = causal and math.min(S, i0 + br - 1) or S   -- causal: no block past the diagonal
    for j0 = 1, last, block do
      local bc = math.min(block, S - j0 + 1)
      local kt <close> = k:narrow(3, j0, bc):transpose(3, 4)
      local s <close> = qi:matmul(kt)                       -- [B, H, br, bc] scores
      if causal and j0 + bc - 1 > i0 then                   -- the block straddles the diagonal
        local rows <close> = lab.arange(i0, i0 + br):view(br, 1)
        local cols <close> = lab.arange(j0, j0 + bc):view(1, bc)
        local future <close> = cols:gt(rows)
        local masked <close> = lab.where(future, -math.huge, s)
        s:copy_(masked)
      end
      local row_max <close> = s:max(4, true)
      local m_new <close> = m:maximum(row_max)
      local correction <close> = m - m_new                  -- rescales what was summed so far
      correction:exp_()
      local p <close> = s - m_new                           -- probabilities, up to the final 1/l
      p:exp_()
      local p_sum <close> = p:sum(4, true)
      local pv <close> = p:matmul(v:narrow(3, j0, bc))
      l:mul_(correction):add_(p_sum)
      o:mul_(correction):add_(pv)
      m:copy_(m_new)
    end
    outs[#outs + 1] = o / l
    lses[#lses + 1] = m + l:log()
  end
  return lab.cat(outs, 3), lab.cat(lses, 3)
end

-- 1. Exactness: the same numbers as standard attention, block sizes that do and do not
-- divide T, with and without the causal mask; every rank its own random inputs.
lab.print0("\n1. Against lab.sdpa (standard attention), every rank its own inputs:")
lab.manual_seed(100 + rank)
local worst = 0
for _, case in ipairs({ { T = 96, block = 32 }, { T = 100, block = 32 }, { T = 64, block = 64 }, { T = 77, block = 16 } }) do
  local q, k, v = lab.randn(2, 3, case.T, 16), lab.randn(2, 3, case.T, 16), lab.randn(2, 3, case.T, 16)
  for _, causal in ipairs({ false, true }) do
    local ref = lab.sdpa(q, k, v, { causal = causal })
    local out, lse = flash_attention(q, k, v, { block = case.block, causal = causal })
    local err = lab.max_abs_diff(out, ref)
    worst = math.max(worst, err)
    -- the log-sum-exp against its definition, from the full score matrix
    local sfull = q:matmul(k:transpose(3, 4)) / 4
    if causal then
      sfull = lab.where(lab.arange(case.T):view(1, case.T):gt(lab.arange(case.T):view(case.T, 1)), -math.huge, sfull)
    end
    local lse_ref = sfull:max(4, true) + (sfull - sfull:max(4, true)):exp():sum(4, true):log()
    worst = math.max(worst, lab.max_abs_diff(lse, lse_ref))
  end
end
dist.print_ranks(string.format("largest |flash - standard| over 16 cases: %.2e", worst))
check("flash equals standard attention (|diff| < 1e-5) on every rank", worst < 1e-5)

-- 2. Memory: peak bytes allocated while computing attention (no autograd), standard vs
-- flash, B=1, H=4, D=64, block 128. Rank r measures every world-th sequence length.
local lengths = { 256, 512, 1024, 2048 }
local H, D, BLOCK = 4, 64, 128
local function peak_of(fn)
  collectgarbage()
  collectgarbage()
  local before = lab.mem.stats().current
  lab.mem.reset_peak()
  local t0 = lab.clock()
  lab.no_grad(fn)
  local ms = (lab.clock() - t0) * 1e3
  return lab.mem.stats().peak - before, ms
end
local table_ = lab.zeros(#lengths, 4, { dtype = "f64" })
for i, T in ipairs(lengths) do
  if (i - 1) % world == rank then
    local q, k, v = lab.randn(1, H, T, D), lab.randn(1, H, T, D), lab.randn(1, H, T, D)
    local std_bytes, std_ms = peak_of(function() return lab.sdpa(q, k, v, { causal = true }) end)
    local fl_bytes, fl_ms = peak_of(function() return flash_attention(q, k, v, { block = BLOCK, causal = true }) end)
    table_[i][1], table_[i][2], table_[i][3], table_[i][4] = std_bytes, fl_bytes, std_ms, fl_ms
  end
end
dist.all_reduce(table_) -- every length was measured by exactly one rank
lab.print0(string.format("\n2. Peak memory of causal attention, B=1 H=%d D=%d (flash block %d):", H, D, BLOCK))
lab.print0(string.format("   %6s %14s %14s %12s %10s %10s", "T", "standard", "flash", "T*T scores", "std ms", "flash ms"))
for i, T in ipairs(lengths) do
  lab.print0(string.format("   %6d %14s %14s %12s %10.1f %10.1f", T, lab.format_bytes(table_[i][1]),
    lab.format_bytes(table_[i][2]), lab.format_bytes(H * T * T * 4), table_[i][3], table_[i][4]))
end
local n = #lengths
local std_growth = table_[n][1] / table_[n - 1][1]
local fl_growth = table_[n][2] / table_[n - 1][2]
lab.print0(string.format("   doubling T from %d to %d: standard x%.2f, flash x%.2f", lengths[n - 1], lengths[n],
  std_growth, fl_growth))
check("standard attention holds the T x T scores (peak >= H T^2 4 bytes)", table_[n][1] >= H * lengths[n] ^ 2 * 4)
check("its memory grows ~4x when T doubles (quadratic)", std_growth > 3.2)
check("flash's grows ~2x (linear: O, m, l and one block of scores)", fl_growth < 2.5)
check(string.format("at T=%d flash needs under a tenth of standard's memory", lengths[n]),
  table_[n][2] < table_[n][1] / 10)
lab.print0("   (times: single runs on CPU ranks sharing cores; FlashAttention's GPU speed-up comes from SRAM, not shown here)")
finish("lab 08")
