-- LoRA: adapters start as the identity (B = 0), only A and B train, the frozen weights do
-- not move and get no gradient, merging gives the same outputs, mistakes are named.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")

local cfg = { vocab = 32, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8 }
local function gpt()
  lab.manual_seed(5)
  return T.place(lab.nn.GPT(cfg))
end
local function batch(k)
  lab.manual_seed(50 + k)
  return T.place(lab.randint(0, cfg.vocab // 2, { 4, cfg.seq_len })) * 2
end

T.test("adapters start at the base model and count what they should", function()
  local base, m = gpt(), gpt()
  local trainable = lab.lora.apply(m, { r = 2, targets = { "qkv", "fc" } })
  -- per block: qkv 16 -> 48 and fc 16 -> 64, each r (in + out)
  T.eq(#trainable, 2 * 2 * 2, "A and B for two layers in two blocks")
  local n = 0
  for _, p in ipairs(trainable) do n = n + p:numel() end
  T.eq(n, 2 * (2 * (16 + 48) + 2 * (16 + 64)))
  local ids = batch(0)
  T.eq(lab.max_abs_diff(m(ids), base(ids)), 0, "B = 0: the same outputs as the base model")
end)

T.test("only the adapters train; the frozen weights stay and get no gradient", function()
  -- a "pretrained" base (copying even tokens), then LoRA learns a new map (t -> 30 - t):
  -- frozen random embeddings alone would cap the logits too low to learn anything
  local m = gpt()
  local pre = lab.optim.AdamW(m:parameters(), { lr = 3e-2 })
  for k = 1, 30 do
    local ids = batch(k)
    pre:zero_grad()
    local _, loss = m(ids, ids)
    loss:backward()
    pre:step()
  end
  local frozen_before = m.blocks:at(1).attn.qkv.weight:clone()
  local trainable = lab.lora.apply(m, { r = 4, alpha = 4 })
  local frozen = m.blocks:at(1).attn.qkv.base.weight
  T.eq(frozen.requires_grad, false)
  local opt = lab.optim.AdamW(trainable, { lr = 1e-2 })
  for _, p in ipairs(m:parameters()) do p.grad = nil end
  local first, last
  for k = 1, 40 do
    local ids = batch(100 + k)
    opt:zero_grad()
    local _, loss = m(ids, 30 - ids)
    loss:backward()
    opt:step()
    first = first or loss:item()
    last = loss:item()
  end
  T.ok(last < 0.6 * first, string.format("loss falls: %.3f -> %.3f", first, last))
  T.eq(frozen.grad, nil, "no gradient for a frozen weight")
  T.eq(m.wte.weight.grad, nil, "nor for the (frozen) embedding")
  T.eq(lab.max_abs_diff(frozen, frozen_before), 0, "the frozen weight did not move")
  -- merging folds B A into W: the same outputs from plain Linears
  local ids = batch(99)
  local with_adapters = lab.no_grad(function() return m(ids) end)
  lab.lora.merge(m)
  T.eq(getmetatable(m.blocks:at(1).attn.qkv), lab.nn.Linear, "a plain Linear again")
  T.ok(lab.max_abs_diff(lab.no_grad(function() return m(ids) end), with_adapters) < 1e-5, "merged outputs equal")
end)

T.test("DDP skips frozen parameters and reduces only the adapters' gradients", function()
  local m = gpt()
  local trainable = lab.lora.apply(m, { r = 2 })
  local model = lab.ddp.wrap(m)
  local n = 0
  for _, b in ipairs(model.buckets) do n = n + b.numel end
  local want = 0
  for _, p in ipairs(trainable) do want = want + p:numel() end
  T.eq(n, want, "bucket elements = adapter elements")
  lab.manual_seed(7 + lab.dist.rank())
  local ids = T.place(lab.randint(0, cfg.vocab, { 2, cfg.seq_len }))
  local _, loss = model(ids, ids)
  loss:backward()
  -- every adapter's gradient is the average over ranks (test_layouts.lua compares every
  -- parameter with one rank's training)
  for i, p in ipairs(trainable) do
    local sum = p.grad:clone()
    lab.dist.all_reduce(sum)
    T.ok(lab.max_abs_diff(p.grad, sum / lab.dist.world()) < 1e-6, "adapter tensor " .. i .. "'s gradient is the average")
  end
end)

T.test("mistakes are named", function()
  T.raises(function() lab.lora.apply(gpt(), { r = 0 }) end, "LoRALinear", "r must be", "got 0")
  T.raises(function() lab.lora.apply(gpt(), { targets = { "nope" } }) end, "lora.apply", "nope")
end)

T.finish()
