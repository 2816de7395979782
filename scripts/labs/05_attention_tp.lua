-- Lab 05: attention split by heads.
--
-- What it shows: multi-head attention parallelises without any communication inside it,
-- because heads are independent. Rank r takes heads r*H/p .. (r+1)*H/p - 1: the rows of
-- W_q, W_k and W_v that produce them (a column-parallel QKV, taken head-block by head-block
-- from each of q, k and v), and computes those heads' attention locally. Two ways to finish:
--   (a) gather: all-gather the head outputs [b, s, h/p] -> [b, s, h], and run the output
--       projection (replicated) on every rank;
--   (b) Megatron: keep the head outputs split and make the output projection row-parallel:
--       each rank multiplies its heads by its columns of W_o and an all-reduce sums them.
-- Both are checked against the full layer, and the collective each one called (counted by
-- lab.dist.stats()) against the derivation: one all-gather or one all-reduce of b*s*h
-- floats. Under a ring, (b) puts 2(p-1)/p of that on the wire per rank and (a) (p-1)/p,
-- but then every rank repeats the whole output projection (wire bytes: formula).
--   scripts/llmlab -n 4 scripts/labs/05_attention_tp.lua
local dist = lab.dist
local rank, p = dist.rank(), dist.world()
local grid = dist.grid { tp = p }
local b, s, H, hd = 2, 12, 2 * p, 4
local h = H * hd

local check, finish = lab.checker(58)

local function tp_traffic()
  for name, ops in pairs(dist.stats()) do if name ~= "world" then return ops end end
  return {}
end

lab.print0(string.format("== Lab 05: attention by heads, %d heads of %d on %d ranks ==", H, hd, p))
lab.manual_seed(0)
local cfg = { d_model = h, n_head = H }
local full = lab.nn.CausalSelfAttention(cfg)
local X = lab.randn(b, s, h)
local ref = full(X)
dist.print_ranks(string.format("owns heads %d..%d: rows %d..%d of each of W_q, W_k, W_v",
  rank * H // p + 1, (rank + 1) * H // p, rank * h // p + 1, (rank + 1) * h // p))

for _, variant in ipairs({ { true, "(a) all-gather the heads, replicated output projection" },
                           { false, "(b) row-parallel output projection, all-reduce" } }) do
  lab.print0("\n" .. variant[2])
  local att = lab.tp.ParallelAttention(cfg, { from = full, group = grid.tp_group, gather_heads = variant[1] })
  local Xa, Xb = X:clone():requires_grad_(), X:clone():requires_grad_()
  dist.reset_stats()
  local y = att(Xb)
  local t = tp_traffic()
  check("output equals the full attention layer", lab.allclose(y, ref, 1e-5, 1e-6))
  local op = variant[1] and "all_gather" or "all_reduce"
  local c = t[op] or { calls = 0, bytes = 0, wire_bytes = 0 }
  local payload = b * s * h * 4
  lab.print0(string.format("  forward: counted %d %s of %s (derived: one, of b*s*h floats = %s);", c.calls, op,
    lab.format_bytes(c.bytes), lab.format_bytes(payload)))
  lab.print0(string.format("  wire bytes per rank under a ring, %s of it (formula): %s",
    variant[1] and "(p-1)/p" or "2(p-1)/p", lab.format_bytes(c.wire_bytes)))
  check("one " .. op .. " of b*s*h floats, as derived", c.calls == 1 and c.bytes == payload)
  local G = lab.randn(b, s, h)
  full:zero_grad()
  full(Xa):backward(G)
  y:backward(G)
  check("input gradient equals the full layer's", lab.allclose(Xb.grad, Xa.grad, 1e-5, 1e-6))
end

finish("lab 05")
