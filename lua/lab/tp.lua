-- lab.tp: tensor parallelism as in Megatron-LM (Shoeybi et al., 2019).
--
-- A linear layer Y = X W^T can be split two ways across the p ranks of a tensor-parallel
-- group, and the two fit together:
--   ColumnParallelLinear: W's output rows are split, rank r computes Y_r = X W_r^T, a slice
--     of Y's columns. X must be whole on every rank: f = copy_to_region (identity forward,
--     all-reduce of dX backward, because every rank's Y_r depends on all of X).
--   RowParallelLinear: W's input columns are split, rank r computes X_r W_r^T, a partial sum
--     of the full Y: g = reduce_from_region (all-reduce forward, identity backward).
-- Column then row (the MLP, or QKV then the output projection) needs no communication in
-- between: one all-reduce forward and one backward per pair.
-- Every layer is built from the unsharded layer's initial weights (same seed on every rank)
-- and keeps its slice, so a model is the same model at TP = 1, 2 or 4.
local errors = require("lab.errors")
local tp = {}
local nn = lab.nn
local D = lab.autograd.dist

-- ---- the process grid ----

-- grid{tp=, dp=}: tensor-parallel groups of consecutive ranks (so TP stays inside a node),
-- data-parallel groups across them: with tp=2, dp=2 ranks {0,1} and {2,3} are TP groups,
-- {0,2} and {1,3} DP groups. It is lab.dist.grid (lab/grid.lua), which also makes the CP,
-- EP and PP groups.
function tp.grid(opts) return lab.dist.grid(opts) end

-- ---- the RNG tracker ----
-- Dropout outside tensor-parallel regions acts on replicated activations and must draw the
-- same mask on every TP rank (the default stream, same seed everywhere); inside a region
-- each rank holds different columns and must draw its own (a stream offset by the TP rank).
local Tracker = {}
Tracker.__index = Tracker
function tp.rng_tracker(grid, seed)
  errors.arg(type(grid) == "table" and math.type(grid.tp_rank) == "integer", "lab.tp.rng_tracker", 1, "a grid (lab.dist.grid)", grid)
  errors.arg(math.type(seed) == "integer", "lab.tp.rng_tracker", 2, "an integer seed", seed)
  return setmetatable({ seed = seed + 2718 + 1009 * grid.tp_rank, state = nil }, Tracker)
end
function Tracker:fork(fn, ...)
  local default = lab.get_rng_state()
  lab.set_rng_state(self.state or { seed = self.seed, offset = 0 })
  local res = table.pack(pcall(fn, ...))
  self.state = lab.get_rng_state()
  lab.set_rng_state(default)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- ---- layers ----

local function group_info(opts, fname, n)
  errors.group(fname, n, opts.group, "opts.group: a process group")
  local grid = opts.grid or tp.default_grid
  local group = opts.group or (grid and grid.tp_group) or lab.dist.world_group()
  return group, lab.dist.world(group), lab.dist.rank(group)
end

-- Megatron-LM's marks on a parameter made by a tensor-parallel layer: it is this rank's
-- slice along dim of the full one (stride > 1: the full tensor is stride blocks, e.g. q, k
-- and v, each split across the ranks). Gradient clipping counts marked parameters on every
-- rank and unmarked (replicated) ones once; tests reassemble the full tensor from them.
local function mark_split(t, dim, stride)
  errors.tensor("lab.tp.mark_split", 1, t)
  errors.arg(math.type(dim) == "integer", "lab.tp.mark_split", 2, "a dimension (integer)", dim)
  errors.arg(stride == nil or math.type(stride) == "integer" and stride >= 1, "lab.tp.mark_split", 3, "a positive integer or nil", stride)
  t.tensor_model_parallel, t.partition_dim, t.partition_stride = true, dim, stride or 1
  return t
end
tp.mark_split = mark_split

-- Sequence parallelism's replicated parameters (LayerNorms, the row-parallel biases added
-- to sequence-split outputs) see only this rank's T/p positions: their gradient here is a
-- partial sum over the sequence, the full one is the sum over the TP group. They are marked
-- p.sequence_parallel = true when made, as in Megatron-LM.
local function mark_sequence_parallel(module)
  for _, p in ipairs(module:parameters()) do p.sequence_parallel = true end
end

-- Every parameter marked sequence_parallel gets a hook that all-reduces its gradient over
-- the TP group as it arrives, before autograd accumulates it into .grad: so the sum is right
-- under gradient accumulation, and DDP's and ZeRO's hooks (which run after accumulation)
-- see the full gradient. Hooked at forward time, so parameters that replaced the marked
-- ones after construction (lab.amp's 16-bit copies carry the mark) are hooked too. Each
-- layer hooks its own, so a layer used outside tp.GPT is right too; tp.GPT hooks the rest.
local hooked = setmetatable({}, { __mode = "k" })
function tp.hook_sequence_parallel_grads(model, group)
  errors.module("lab.tp.hook_sequence_parallel_grads", 1, model)
  errors.group("lab.tp.hook_sequence_parallel_grads", 2, group)
  for _, p in ipairs(model:parameters()) do
    if p.sequence_parallel and not hooked[p] then
      hooked[p] = true
      p:register_hook(function(g)
        return lab.no_grad(function()
          local sum = g:clone()
          lab.dist.all_reduce(sum, { group = group })
          return sum
        end)
      end)
    end
  end
end

local function check_divisible(what, n, p)
  if n % p ~= 0 then error(string.format("rank %d: %s of %d does not divide over %d tensor-parallel ranks",
      lab.dist.rank(), what, n, p), 0) end
end

-- What both split layers start from: the group, the full layer they are cut from (opts.from,
-- or a new nn.Linear: every rank draws the same one) and this rank's share [lo, lo + n - 1]
-- of `size` (the dimension split), which must divide over the group.
local function split_from(self, name, n_in, n_out, opts, what, size)
  self.group, self.p, self.r = group_info(opts, name, 3)
  check_divisible(name .. ": " .. what, size, self.p)
  self.n_in, self.n_out, self.sequence_parallel = n_in, n_out, opts.sequence_parallel
  local full = opts.from or nn.Linear(n_in, n_out, { bias = opts.bias, dtype = opts.dtype })
  local n = size // self.p
  return full, self.r * n + 1, n
end

-- y = x W^T + b with W [out, in] split by output rows
local ColumnParallelLinear = nn.class("ColumnParallelLinear")
tp.ColumnParallelLinear = ColumnParallelLinear
function ColumnParallelLinear:init(n_in, n_out, opts)
  opts = errors.sizes("ColumnParallelLinear", opts, n_in, "n_in", n_out, "n_out")
  local full, lo, rows = split_from(self, "ColumnParallelLinear", n_in, n_out, opts, "output size", n_out)
  self.gather_output = opts.gather_output ~= false
  mark_split(self:param("weight", full.weight:detach():slice(1, lo, lo + rows - 1):clone()), 1)
  if full.bias then mark_split(self:param("bias", full.bias:detach():slice(1, lo, lo + rows - 1):clone()), 1) end
end
function ColumnParallelLinear:describe()
  return string.format("%d -> %d / %d ranks%s", self.n_in, self.n_out, self.p, self.gather_output and ", gathered" or "")
end
function ColumnParallelLinear:forward(x)
  local opts = { group = self.group }
  -- f: x is needed whole; its gradient comes back as the sum over ranks
  if self.sequence_parallel then
    x = D.all_gather(x, { group = self.group, dim = 2 }) -- [B, T/p, C] -> [B, T, C]
  else
    x = D.copy_to_region(x, opts)
  end
  local y = nn.linear(x, self.weight, self.bias) -- this rank's n_out / p output columns
  if self.gather_output then y = D.gather_from_region(y, opts) end
  return y
end

-- y = x W^T + b with W [out, in] split by input columns; b is added once, after the sum
local RowParallelLinear = nn.class("RowParallelLinear")
tp.RowParallelLinear = RowParallelLinear
function RowParallelLinear:init(n_in, n_out, opts)
  opts = errors.sizes("RowParallelLinear", opts, n_in, "n_in", n_out, "n_out")
  local full, lo, cols = split_from(self, "RowParallelLinear", n_in, n_out, opts, "input size", n_in)
  self.input_is_parallel = opts.input_is_parallel ~= false
  mark_split(self:param("weight", full.weight:detach():slice(2, lo, lo + cols - 1):clone()), 2)
  if full.bias then
    self:param("bias", full.bias:detach():clone())
    -- added after the reduce-scatter, to this rank's positions only
    if self.sequence_parallel then self.bias.sequence_parallel = true end
  end
end
function RowParallelLinear:describe()
  return string.format("%d / %d ranks -> %d%s", self.n_in, self.p, self.n_out, self.input_is_parallel and "" or ", scatters its input")
end
function RowParallelLinear:forward(x)
  local opts = { group = self.group }
  if not self.input_is_parallel then x = D.scatter_to_region(x, opts) end
  local partial = nn.linear(x, self.weight) -- this rank's share of every output
  local y
  if self.sequence_parallel then
    y = D.reduce_scatter(partial, { group = self.group, dim = 2 }) -- sum, keep my T/p rows
  else
    y = D.reduce_from_region(partial, opts) -- g: the sum over ranks
  end
  if self.bias then
    if self.sequence_parallel then tp.hook_sequence_parallel_grads(self, self.group) end
    y = y + self.bias
  end
  return y
end

-- The Megatron FFN: column (no gather) -> GELU -> row (input already split)
local ParallelMLP = nn.class("ParallelMLP")
tp.ParallelMLP = ParallelMLP
function ParallelMLP:init(d_model, d_ff, opts)
  opts = errors.sizes("ParallelMLP", opts, d_model, "d_model", d_ff, "d_ff")
  local from = opts.from or {}
  self:add("fc", ColumnParallelLinear(d_model, d_ff, { gather_output = false, from = from.fc, group = opts.group,
    grid = opts.grid, sequence_parallel = opts.sequence_parallel }))
  self:add("act", nn.GELU({ approximate = "tanh" }))
  self:add("proj", RowParallelLinear(d_ff, d_model, { input_is_parallel = true, from = from.proj, group = opts.group,
    grid = opts.grid, sequence_parallel = opts.sequence_parallel }))
end
function ParallelMLP:forward(x) return self.proj(self.act(self.fc(x))) end

-- Attention split by heads: rank r owns heads r*h..(r+1)*h-1 of q, k and v (a column-
-- parallel QKV whose rows are taken head-block by head-block from each of q, k, v),
-- attends locally, and the row-parallel output projection sums the heads' contributions.
-- With gather_heads (lab 05) the head outputs are all-gathered instead and a replicated
-- output projection runs on every rank.
local ParallelAttention = nn.class("ParallelAttention")
tp.ParallelAttention = ParallelAttention
function ParallelAttention:init(cfg, opts)
  errors.type("ParallelAttention", 1, cfg, "table", "a config table")
  errors.posint("ParallelAttention", 1, cfg.d_model, "cfg.d_model")
  errors.posint("ParallelAttention", 1, cfg.n_head, "cfg.n_head")
  errors.opts("ParallelAttention", 2, opts)
  opts = opts or {}
  self.group, self.p, self.r = group_info(opts, "ParallelAttention", 2)
  check_divisible("ParallelAttention: heads", cfg.n_head, self.p)
  self.d_model, self.n_head, self.gather_heads = cfg.d_model, cfg.n_head, opts.gather_heads
  self.sequence_parallel = opts.sequence_parallel
  local full = opts.from or nn.CausalSelfAttention(cfg)
  local C, per = cfg.d_model, cfg.d_model // self.p
  local w, b = full.qkv.weight:detach(), full.qkv.bias:detach()
  local lo = self.r * per + 1
  local wq = lab.cat({ w:slice(1, lo, lo + per - 1), w:slice(1, C + lo, C + lo + per - 1),
    w:slice(1, 2 * C + lo, 2 * C + lo + per - 1) }, 1)
  local bq = lab.cat({ b:slice(1, lo, lo + per - 1), b:slice(1, C + lo, C + lo + per - 1),
    b:slice(1, 2 * C + lo, 2 * C + lo + per - 1) }, 1)
  mark_split(self:param("qkv_weight", wq), 1, 3)
  mark_split(self:param("qkv_bias", bq), 1, 3)
  if self.gather_heads then
    self:add("proj", full.proj)
  else
    self:add("proj", RowParallelLinear(C, C, { input_is_parallel = true, from = full.proj, group = self.group,
      sequence_parallel = self.sequence_parallel }))
  end
end
function ParallelAttention:describe() return string.format("%d heads / %d ranks", self.n_head, self.p) end
function ParallelAttention:forward(x)
  errors.tensor("ParallelAttention:forward", 1, x)
  if x:dim() ~= 3 or x.shape[3] ~= self.d_model then
    errors.raise("ParallelAttention:forward", "x must be [B, T%s, %d] (d_model %d), got shape [%s]",
      self.sequence_parallel and "/p" or "", self.d_model, self.d_model, table.concat(x.shape, ", "))
  end
  local opts = { group = self.group }
  if self.sequence_parallel then x = D.all_gather(x, { group = self.group, dim = 2 })
  else x = D.copy_to_region(x, opts) end
  local B, T, C = x.shape[1], x.shape[2], x.shape[3]
  local per, h = C // self.p, self.n_head // self.p
  local qkv = x:reshape(B * T, C):matmul(self.qkv_weight:t()) + self.qkv_bias
  local q, k, v = table.unpack(qkv:view(B, T, 3 * per):split(per, 3))
  local function heads(t) return t:view(B, T, h, C // self.n_head):transpose(2, 3) end
  local y = lab.sdpa(heads(q), heads(k), heads(v), { causal = true }):transpose(2, 3):contiguous():view(B, T, per)
  if self.gather_heads then
    return self.proj(D.gather_from_region(y, opts)) -- every rank: all heads, full projection
  end
  return self.proj(y)
end

-- Embedding with the vocabulary split: rank r holds rows [r V/p, (r+1) V/p). Ids outside
-- the slice look up zeros, and an all-reduce assembles the full embedding.
local VocabParallelEmbedding = nn.class("VocabParallelEmbedding")
tp.VocabParallelEmbedding = VocabParallelEmbedding
function VocabParallelEmbedding:init(vocab, dim, opts)
  opts = errors.sizes("VocabParallelEmbedding", opts, vocab, "vocab", dim, "dim")
  self.group, self.p, self.r = group_info(opts, "VocabParallelEmbedding", 3)
  check_divisible("VocabParallelEmbedding: vocabulary", vocab, self.p)
  self.vocab, self.dim = vocab, dim
  local full = opts.from or nn.Embedding(vocab, dim)
  local rows = vocab // self.p
  self.lo = self.r * rows
  mark_split(self:param("weight", full.weight:detach():slice(1, self.lo + 1, self.lo + rows):clone()), 1)
end
function VocabParallelEmbedding:describe() return string.format("%d / %d ranks x %d", self.vocab, self.p, self.dim) end
function VocabParallelEmbedding:forward(ids)
  errors.tensor("VocabParallelEmbedding:forward", 1, ids)
  local rows = self.vocab // self.p
  local outside = ids:lt(self.lo):bool():to("i64"):maximum(ids:ge(self.lo + rows):to("i64"))
  local local_ids = lab.where(outside:eq(1), 0, ids - self.lo)
  local e = lab.embedding(local_ids, self.weight)
  local keep = lab.ones_like(outside):sub(outside):to(e.dtype):unsqueeze(-1)
  return D.reduce_from_region(e * keep, { group = self.group })
end

-- Cross-entropy over logits split by vocabulary [N, V/p] without gathering them: the
-- max, the sum of exponentials and the target's logit are each all-reduced (3 scalars per
-- row). Its backward needs no communication: softmax(local) - onehot(local).
local function vocab_parallel_ce(logits, target, group)
  errors.tensor("lab.tp.vocab_parallel_cross_entropy", 1, logits)
  errors.tensor("lab.tp.vocab_parallel_cross_entropy", 2, target)
  errors.group("lab.tp.vocab_parallel_cross_entropy", 3, group)
  if logits:dim() < 1 then
    errors.raise("lab.tp.vocab_parallel_cross_entropy", "logits must be [..., V/p] (at least 1 dimension), got a 0-d tensor")
  end
  local r = lab.dist.rank(group)
  local Vp = logits.shape[#logits.shape]
  local lo = r * Vp
  local F = lab.autograd.Function {
    forward = function(ctx, z)
      local x = z:reshape(-1, Vp)
      local t = target:reshape(-1, 1)
      local m = x:max(2, true) -- the row max over all ranks keeps exp() in range
      lab.dist.all_reduce(m, { op = "max", group = group })
      local e = (x - m):exp()
      local s = e:sum(2, true)
      lab.dist.all_reduce(s, { group = group })
      -- onehot of the target among this rank's columns (all zero when another rank has it)
      local onehot = lab.arange(lo, lo + Vp, { device = x.device }):view(1, Vp):eq(t):to(x.dtype)
      local picked = (x * onehot):sum(2, true)
      lab.dist.all_reduce(picked, { group = group })
      ctx.probs, ctx.onehot, ctx.shape = e / s, onehot, z.shape
      return (s:log() + m - picked):mean()
    end,
    backward = function(ctx, g)
      local rows = ctx.probs.shape[1]
      return ((ctx.probs - ctx.onehot) * (g:item() / rows)):view(ctx.shape)
    end,
  }
  return F(logits)
end
tp.vocab_parallel_cross_entropy = vocab_parallel_ce

-- ---- a tensor-parallel GPT ----
-- Built from an unsharded lab.nn.GPT (cfg.tied must be false: the head is a column-parallel
-- linear over the vocabulary, whose logits go straight into the vocab-parallel loss).

local TPBlock = nn.class("TPBlock")
tp.Block = TPBlock
function TPBlock:init(full, cfg, opts)
  errors.module("tp.Block", 1, full)
  errors.type("tp.Block", 2, cfg, "table", "a config table")
  errors.type("tp.Block", 3, opts, "table", "an options table")
  self.sequence_parallel, self.group = opts.sequence_parallel, group_info(opts)
  self.p_drop, self.tracker = cfg.dropout or 0, opts.tracker
  if opts.sequence_parallel then
    mark_sequence_parallel(full.ln1)
    mark_sequence_parallel(full.ln2)
  end
  self:add("ln1", full.ln1)
  self:add("attn", ParallelAttention(cfg, { from = full.attn, group = opts.group, sequence_parallel = opts.sequence_parallel }))
  self:add("ln2", full.ln2)
  if getmetatable(full.mlp) == lab.moe.MoE then
    -- a MoE MLP stays whole here: its experts are split over its EP group, and every TP
    -- rank routes the same (replicated) tokens; sequence parallelism would split them
    if opts.sequence_parallel then
      error(string.format("rank %d: tp.GPT: MoE blocks need sequence_parallel = false", lab.dist.rank()), 0)
    end
    self:add("mlp", full.mlp)
  else
    self:add("mlp", ParallelMLP(cfg.d_model, cfg.d_ff or 4 * cfg.d_model, { from = full.mlp, group = opts.group,
      sequence_parallel = opts.sequence_parallel }))
  end
end
-- Residual dropout acts on replicated activations (the same mask on every TP rank: the
-- default stream), or, with sequence parallelism, on each rank's own positions (its own
-- stream, from the tracker).
function TPBlock:drop(y)
  if self.p_drop == 0 or not self.training then return y end
  if self.sequence_parallel then
    return self.tracker:fork(function() return lab.dropout(y, self.p_drop, true) end)
  end
  return lab.dropout(y, self.p_drop, true)
end
function TPBlock:forward(x)
  if self.sequence_parallel then tp.hook_sequence_parallel_grads(self, self.group) end
  x = x + self:drop(self.attn(self.ln1(x)))
  return x + self:drop(self.mlp(self.ln2(x)))
end

local TPGPT = nn.class("TPGPT")
tp.GPT = TPGPT
-- cfg as lab.nn.GPT's; opts: grid or group, sequence_parallel
function TPGPT:init(cfg, opts)
  errors.type("tp.GPT", 1, cfg, "table", "a config table")
  errors.opts("tp.GPT", 2, opts)
  opts = opts or {}
  if cfg.tied ~= false then errors.raise("tp.GPT", "the vocab-parallel head needs cfg.tied = false") end
  self.cfg = cfg
  self.group, self.p, self.r = group_info(opts)
  self.sequence_parallel = opts.sequence_parallel
  local full = nn.GPT(cfg) -- same seed on every rank: the same initial model everywhere
  local tracker = tp.rng_tracker({ tp_rank = self.r }, opts.seed or 1234)
  self:add("wte", VocabParallelEmbedding(cfg.vocab, cfg.d_model, { from = full.wte, group = self.group }))
  self:add("wpe", full.wpe)
  local blocks = nn.ModuleList()
  for i = 1, cfg.n_layer do
    blocks:append(TPBlock(full.blocks:at(i), cfg, { group = self.group, sequence_parallel = opts.sequence_parallel,
      tracker = tracker }))
  end
  self:add("blocks", blocks)
  self:add("ln_f", full.ln_f)
  self:add("head", ColumnParallelLinear(cfg.d_model, cfg.vocab, { from = full.head, gather_output = false,
    group = self.group, sequence_parallel = opts.sequence_parallel }))
  if opts.sequence_parallel then mark_sequence_parallel(self.ln_f) end
end

function TPGPT:forward(ids, targets)
  local T = ids.shape[2]
  if self.sequence_parallel then tp.hook_sequence_parallel_grads(self, self.group) end
  local x = self.wte(ids) + self.wpe(lab.arange(T, { device = ids.device }))
  if self.sequence_parallel then
    -- from here to the head, activations are split along the sequence
    x = D.scatter_to_region(x, { group = self.group, dim = 2 })
  end
  for _, block in self.blocks:iter() do x = block(x) end
  local logits = self.head(self.ln_f(x)) -- [B, T, V/p]
  if targets then
    local loss = vocab_parallel_ce(logits, targets, self.group)
    if self.cfg.moe then loss = loss + lab.moe.aux_total(self) end -- router balance and z-losses
    return logits, loss
  end
  return logits
end

return tp
