-- Context parallelism composed with the other parallelisms, one GPT each, against its
-- single-rank twin in the loss and in every parameter's gradient (through the all-gradients
-- helper): CP x TP and CP x DP at 4 ranks, CP x TP x DP with MoE layers under EP at 8 ranks
-- (registered apart in tests/CMakeLists.txt; tiny, as 8 ranks share 2 cores in CI), and
-- the TP path of lab.cp.GPT alone at 2 ranks.
--
-- The MoE layers drop nothing (no capacity), so routing is per token and equal to the
-- twin's; their balance loss is computed over each rank's positions (its own groups), which
-- no single-rank grouping reproduces under the zigzag split, so it is weighted 0 here; the
-- z-loss, a mean over tokens, is kept.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local E = require("equivalence")
local n = lab.dist.world()

local function rename(name) return (name:gsub("attn%.qkv_weight$", "attn.qkv.weight"):gsub("attn%.qkv_bias$", "attn.qkv.bias")) end

local function case(sizes, attention, moe)
  local label = string.format("CP %d x TP %d x DP %d%s (%s)", sizes.cp, sizes.tp, sizes.dp,
    moe and string.format(" with MoE under EP %d", sizes.ep or 1) or "", attention)
  T.test(label .. " equals the single-rank GPT in its loss and every gradient", function()
    local g = lab.dist.grid(sizes)
    local T_ = 4 * sizes.cp -- zigzag: two chunks of 2 positions per CP rank
    local cfg = { vocab = 16, d_model = 8, n_layer = moe and 2 or 1, n_head = 2, seq_len = T_, d_ff = 8, tied = false }
    local pcfg = {}
    for k, v in pairs(cfg) do pcfg[k] = v end
    if moe then
      cfg.moe = { experts = 4, top_k = 2, every = 2, aux_loss_coef = 0, z_loss_coef = 0.1 }
      pcfg.moe = { experts = 4, top_k = 2, every = 2, aux_loss_coef = 0, z_loss_coef = 0.1, group = g.ep_group }
    end
    lab.manual_seed(31)
    local twin = T.place(lab.nn.GPT(cfg))
    local model = T.place(lab.cp.GPT(pcfg, { group = g.cp_group, tp_group = g.tp_group, attention = attention }))
    lab.moe.copy_from_full(model, twin, { tp_group = g.tp_group, rename = rename })
    local B = 1
    lab.manual_seed(32)
    local ids = T.place(lab.randint(0, 16, { B * sizes.dp, T_ }))
    local tgt = T.place(lab.randint(0, 16, { B * sizes.dp, T_ }))
    local _, lt = twin(ids, tgt)
    lt:backward()
    local function mine(t) return t:narrow(1, g.dp_rank * B + 1, B):contiguous() end
    local _, l = model(mine(ids), mine(tgt))
    l:backward()
    if moe then
      lab.moe.sync_gradients(model, { dp_group = g.dp_cp_group, expert_dp_group = g.edp_group })
    else
      lab.cp.sync_gradients(model, g.dp_cp_group)
    end
    local avg = lab.tensor({ l:item() }, { dtype = "f64" })
    lab.dist.all_reduce(avg, { op = "avg", group = g.dp_cp_group })
    T.near(avg[1], lt:item(), 1e-5, "the loss averaged over the CP and DP ranks")
    local entries = {}
    for _, np in ipairs(model:named_parameters()) do
      local p = np[2]
      local function whole(t)
        if lab.moe.expert_slices[p] and sizes.ep and sizes.ep > 1 then
          return lab.cat(lab.dist.all_gather(t:contiguous(), { group = g.ep_group }), 1)
        end
        return E.unsplit(t, p, g.tp_group)
      end
      entries[#entries + 1] = { name = rename(np[1]), value = whole(p:detach()), grad = p.grad and whole(p.grad) or nil }
    end
    E.check(T, label, entries, twin, { rtol = 1e-4, atol = 1e-6 })
  end)
end

if n == 8 then
  case({ cp = 2, tp = 2, dp = 2, ep = 2 }, "ring", true)
elseif n == 4 then
  case({ cp = 2, tp = 2, dp = 1 }, "ring")
  case({ cp = 2, tp = 1, dp = 2 }, "ring")
  case({ cp = 2, tp = 1, dp = 2 }, "allgather")
  case({ cp = 2, tp = 1, dp = 2, ep = 2 }, "ring", true)
elseif n == 2 then
  case({ cp = 1, tp = 2, dp = 1 }, "ring")
  case({ cp = 2, tp = 1, dp = 1 }, "ring", true)
else
  case({ cp = 1, tp = 1, dp = 1 }, "ring", true)
end

T.finish()
