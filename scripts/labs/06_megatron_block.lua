-- Lab 06: a Megatron transformer block, trained, with a per-segment time table.
--
-- What it shows: LayerNorm, attention split by heads, the Megatron FFN, residuals and the
-- differentiable all-reduces (f and g) assembled into one block that trains like the
-- unsplit block does (same losses, checked), and where the time goes: lab.prof times
-- attention, FFN and backward on every rank and records the communication inside each
-- section apart from compute; the table shows min / median / max over ranks. With more
-- ranks than cores it shows each rank's busy time (CPU time outside collectives) instead of
-- a communication share, which would measure waiting for a core.
--   scripts/llmlab -n 4 scripts/labs/06_megatron_block.lua
-- lab.prof.trace("block.json") would write the same sections as a Chrome trace.
local dist = lab.dist
local prof = lab.prof
local rank, p = dist.rank(), dist.world()
local grid = dist.grid { tp = p }
local b, s, h, H = 4, 32, 16 * p, 2 * p
local cfg = { d_model = h, n_head = H }

local check, finish = lab.checker(50)

-- the block, written out so each segment can be timed:
--   x = x + Attention(LN1(x))     (f before QKV, g after the output projection)
--   x = x + FFN(LN2(x))           (f before fc, g after proj)
local Block = lab.nn.class("MegatronBlock")
function Block:init(full)
  self:add("ln1", full.ln1)
  self:add("attn", lab.tp.ParallelAttention(cfg, { from = full.attn, group = grid.tp_group }))
  self:add("ln2", full.ln2)
  self:add("mlp", lab.tp.ParallelMLP(h, 4 * h, { from = full.mlp, group = grid.tp_group }))
end
function Block:forward(x)
  x = x + prof.section("attention", function() return self.attn(self.ln1(x)) end)
  return x + prof.section("ffn", function() return self.mlp(self.ln2(x)) end)
end

lab.print0(string.format("== Lab 06: a Megatron block, h = %d, %d heads, TP = %d ==", h, H, p))
lab.manual_seed(0)
local full = lab.nn.Block(cfg) -- the unsplit reference
lab.manual_seed(0)
local block = Block(lab.nn.Block(cfg)) -- the same initial block, split (it keeps the LayerNorms)
lab.print0(tostring(block))
local opt_full = lab.optim.AdamW(full:parameters(), { lr = 1e-3 })
local opt = lab.optim.AdamW(block:parameters(), { lr = 1e-3 })
lab.manual_seed(1)
local X, target = lab.randn(b, s, h), lab.randn(b, s, h)

lab.print0("\ntraining 5 steps, the split block beside the unsplit one:")
for step = 1, 6 do
  if step == 2 then prof.reset() end -- step 1 warms up allocator and BLAS
  local l_full = ((full(X) - target) ^ 2):mean()
  opt_full:zero_grad()
  l_full:backward()
  opt_full:step()
  prof.start("step")
  local loss = prof.section("forward", function() return ((block(X) - target) ^ 2):mean() end)
  opt:zero_grad()
  prof.section("backward", function() loss:backward() end)
  prof.section("optimizer", function() opt:step() end)
  prof.stop()
  if step > 1 then
    lab.print0(string.format("  step %d: loss %.6f (unsplit %.6f)", step - 1, loss:item(), l_full:item()))
    check("step " .. (step - 1) .. ": same loss as the unsplit block", math.abs(loss:item() - l_full:item()) <= 1e-5 * l_full:item())
  end
end

lab.print0("\nper-segment time over 5 steps (communication measured inside each section):")
prof.report()
lab.print0("\nattention and ffn each end in one all-reduce (g); the backward holds the two of f.")
lab.print0("time inside a collective includes waiting for the slowest rank to arrive, so 'comm' is")
lab.print0("moving bytes only when every rank has a core of its own and the others are idle.")

finish("lab 06")
